/**
 * The hints the live hub passes on without reading anything itself: `k:<key id>`, an API key's
 * standing changed (revoked), for the gateway's KeyWatch (../key-watch.ts) to end what the key
 * has open; and `c`, the handler catalogue changed (migration 000029), for the CatalogWatch
 * (../handler-catalogue-watch.ts).
 */
export class HintFanOut {
  /** Who hears that an API key's standing may have changed; undefined: any key's. */
  private readonly keyListeners = new Set<(keyId: string | undefined) => void>();
  /** Who hears that the handler catalogue may have changed. */
  private readonly catalogListeners = new Set<() => void>();

  onKey(fn: (keyId: string | undefined) => void): () => void {
    this.keyListeners.add(fn);
    return () => this.keyListeners.delete(fn);
  }

  onCatalog(fn: () => void): () => void {
    this.catalogListeners.add(fn);
    return () => this.catalogListeners.delete(fn);
  }

  keyChanged(keyId: string | undefined): void {
    for (const fn of this.keyListeners) fn(keyId);
  }

  catalogChanged(): void {
    for (const fn of this.catalogListeners) fn();
  }
}
