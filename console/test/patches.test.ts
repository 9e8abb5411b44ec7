import { describe, expect, it } from 'vitest';
import { patched, unseenBy, withPatch, type Patches } from '../src/lib/patches.ts';

describe('live patches over a reloaded list', () => {
  it('shows the newest event over a reload that was asked before it arrived', () => {
    // A reload is asked at 10; an event (RUNNING) arrives at 12; the reload answers at 15 with
    // the row as it was at 10 (PENDING).
    let patches: Patches<string> = {};
    patches = withPatch(patches, 'e1', 'RUNNING', 12);
    patches = unseenBy(patches, 10);
    expect(patched(patches, 'e1', 'PENDING')).toBe('RUNNING');
  });

  it('lets a reload asked after the event show the row as it is', () => {
    let patches: Patches<string> = withPatch({}, 'e1', 'RUNNING', 12);
    patches = unseenBy(patches, 13);
    expect(patches).toEqual({});
    expect(patched(patches, 'e1', 'SUCCEEDED')).toBe('SUCCEEDED');
  });

  it('keeps the same object when a reload drops nothing, and the newest patch per row', () => {
    const patches = withPatch(withPatch({}, 'e1', 'RUNNING', 5), 'e1', 'PENDING', 7);
    expect(patched(patches, 'e1', 'FAILED')).toBe('PENDING');
    expect(unseenBy(patches, 6)).toBe(patches);
  });
});
