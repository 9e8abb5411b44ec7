import { describe, expect, it } from 'vitest';
import { CursorTracker, nextLiveState, retryDelayMs } from '../src/lib/live.ts';

describe('the connection state', () => {
  it('connects, drops to reconnecting, and comes back live', () => {
    let s = nextLiveState('connecting', { type: 'connecting' });
    expect(s).toBe('connecting');
    s = nextLiveState(s, { type: 'connected' });
    expect(s).toBe('live');
    s = nextLiveState(s, { type: 'closed', code: 1006 });
    expect(s).toBe('reconnecting');
    s = nextLiveState(s, { type: 'connecting' });
    expect(s).toBe('reconnecting');
    expect(nextLiveState(s, { type: 'connected' })).toBe('live');
  });

  it('stays "connecting" while the first connection fails', () => {
    expect(nextLiveState('connecting', { type: 'closed', code: 1006 })).toBe('connecting');
  });

  it('signs out on 4403 (key revoked or changed) and never leaves that state', () => {
    const s = nextLiveState('live', { type: 'closed', code: 4403 });
    expect(s).toBe('signedOut');
    expect(nextLiveState(s, { type: 'connecting' })).toBe('signedOut');
    expect(nextLiveState(s, { type: 'connected' })).toBe('signedOut');
  });

  it('waits longer after each failed attempt, capped, with jitter', () => {
    expect(retryDelayMs(0, () => 1)).toBe(500);
    expect(retryDelayMs(0, () => 0)).toBe(250);
    expect(retryDelayMs(3, () => 1)).toBe(4000);
    expect(retryDelayMs(30, () => 1)).toBe(8000);
  });
});

describe('event cursors', () => {
  it('remembers the latest cursor and drops an event seen before', () => {
    const c = new CursorTracker();
    expect(c.accept('a')).toBe(true);
    expect(c.accept('b')).toBe(true);
    expect(c.accept('a')).toBe(false);
    expect(c.latest).toBe('b');
    expect(c.accept(null)).toBe(true);
    expect(c.latest).toBe('b');
  });

  it('forgets the oldest cursors past its memory, and everything on reset', () => {
    const c = new CursorTracker(null, 2);
    c.accept('a');
    c.accept('b');
    c.accept('c');
    expect(c.accept('a')).toBe(true);
    c.reset();
    expect(c.latest).toBeNull();
    expect(c.accept('c')).toBe(true);
  });
});
