/**
 * The live hub's one listening connection (../../db/listener.ts) on the live channel
 * (../../db/channels.ts, which owns its payloads), and what each hint means: `e` and `f`, new events
 * or findings; `r:<run id>`, a run changed; `b:<batch id>`, a batch changed; `k:<key id>`, a key's
 * standing changed; `c`, the handler catalogue changed. While the listener cannot listen (mode `poll`), and whenever it
 * (re)connects, hints may have been missed, so everything is looked at again: every `pollMs` in
 * the first case, once in the second.
 */
import type { Logger } from '../../log.js';
import { liveChannel } from '../../db/channels.js';
import { createListener, type Listener, type ListenMode } from '../../db/listener.js';
import type { Observer } from '../../service/kernel/observer.js';
import type { Lifetime } from './shared.js';

/** Where the hints go. */
export interface HintTargets {
  /** `e` or `f`: events or findings were written. */
  streams(): void;
  /** `r:<id>`: the run changed. */
  run(runId: string): void;
  /** `b:<id>`: the batch changed. */
  batch(batchId: string): void;
  /** `k:<id>`: the key's standing changed; undefined: any key's may have. */
  key(keyId: string | undefined): void;
  /** `c`: the handler catalogue changed. */
  catalog(): void;
  /** Hints may have been missed (polling, or the listener reconnected). */
  anything(): void;
}

export interface HintListenerOptions {
  /** Where to LISTEN; null: nowhere, the hub polls (src/db/listener.ts). */
  listenConnectionString: string | null;
  log: Logger;
  observer: Observer;
  /** How often to look when notifications are not arriving. */
  pollMs: number;
  checkEveryMs?: number | undefined;
  probeTimeoutMs?: number | undefined;
  lifetime: Lifetime;
}

export class HintListener {
  readonly listener: Listener;
  private pollTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly options: HintListenerOptions,
    targets: HintTargets,
  ) {
    this.listener = createListener({
      connectionString: options.listenConnectionString,
      channels: [liveChannel.name],
      log: options.log,
      checkEveryMs: options.checkEveryMs,
      probeTimeoutMs: options.probeTimeoutMs,
      observer: options.observer,
      onListening: () => {
        targets.anything();
        targets.key(undefined); // a revocation may have been missed meanwhile
      },
      onMode: (mode) => this.onMode(mode, targets),
      onHint: (_channel, payload) => dispatch(payload, targets),
    });
    this.onMode('poll', targets); // until the listener's first probe comes back
  }

  /** Stops polling (the listener itself is stopped through `listener.stop`). */
  stopPolling(): void {
    clearInterval(this.pollTimer);
  }

  private onMode(mode: ListenMode, targets: HintTargets): void {
    clearInterval(this.pollTimer);
    this.pollTimer = undefined;
    if (mode === 'poll' && !this.options.lifetime.stopped) {
      this.pollTimer = setInterval(() => targets.anything(), this.options.pollMs);
      this.pollTimer.unref();
    }
  }
}

function dispatch(payload: string, targets: HintTargets): void {
  const hint = liveChannel.decode(payload);
  if (hint?.kind === 'events' || hint?.kind === 'findings') targets.streams();
  else if (hint?.kind === 'catalog') targets.catalog();
  else if (hint?.kind === 'key') targets.key(hint.keyId);
  else if (hint?.kind === 'run') targets.run(hint.runId);
  else if (hint?.kind === 'batch') targets.batch(hint.batchId);
}
