/**
 * The signed-in key, kept for this tab's session only (sessionStorage: gone when the tab closes,
 * never shared with other tabs, never a cookie).
 */
const KEY = 'jobgate.console.key';
const NOTICE = 'jobgate.console.notice';

export function storedKey(): string | null {
  try {
    return sessionStorage.getItem(KEY);
  } catch {
    return null;
  }
}

export function storeKey(key: string): void {
  sessionStorage.setItem(KEY, key);
  sessionStorage.removeItem(NOTICE);
}

/** Forgets the key; `notice` is shown on the sign-in screen (why the tab was signed out). */
export function forgetKey(notice?: string): void {
  sessionStorage.removeItem(KEY);
  if (notice) sessionStorage.setItem(NOTICE, notice);
}

export function signOutNotice(): string | null {
  try {
    return sessionStorage.getItem(NOTICE);
  } catch {
    return null;
  }
}
