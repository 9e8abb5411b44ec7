/**
 * A confirmation before an action that cannot be taken back (cancelling) or that changes many
 * things at once (a bulk action): a modal <dialog>, so focus stays inside it, Escape declines,
 * and focus returns to the button that asked. The message states what and how many.
 */
import { useCallback, useEffect, useRef, useState, type ReactNode } from 'react';

export interface ConfirmRequest {
  /** What will happen, with the count: "Cancel 12 executions?" */
  message: string;
  /** The confirming button's label, naming the action: "Cancel 12 executions". */
  action: string;
}

interface Pending extends ConfirmRequest {
  resolve(ok: boolean): void;
}

/** The dialog to render, and `confirm(request)`, which resolves true when the action is confirmed. */
export function useConfirm(): [ReactNode, (request: ConfirmRequest) => Promise<boolean>] {
  const [pending, setPending] = useState<Pending | null>(null);
  const ref = useRef<HTMLDialogElement>(null);
  const keep = useRef<HTMLButtonElement>(null);
  const opener = useRef<Element | null>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (!pending || !dialog || dialog.open) return;
    dialog.showModal();
    // showModal() focuses the dialog's first focusable element, the action: an Enter meant for
    // the button that opened it would confirm. React's autoFocus ran before showModal() and puts
    // no `autofocus` attribute in the page for the dialog to honour, so declining is focused here.
    keep.current?.focus();
  }, [pending]);
  const confirm = useCallback(
    (request: ConfirmRequest) =>
      new Promise<boolean>((resolve) => {
        opener.current = document.activeElement;
        setPending({ ...request, resolve });
      }),
    [],
  );
  const close = (ok: boolean) => {
    pending?.resolve(ok);
    setPending(null);
    ref.current?.close();
    if (opener.current instanceof HTMLElement) opener.current.focus();
  };
  const dialog = pending && (
    <dialog
      ref={ref}
      className="confirm"
      aria-labelledby="confirm-message"
      onCancel={(e) => {
        e.preventDefault();
        close(false);
      }}
    >
      <p id="confirm-message">{pending.message}</p>
      <div className="actions">
        <button type="button" className="danger" onClick={() => close(true)}>
          {pending.action}
        </button>
        <button type="button" ref={keep} onClick={() => close(false)}>
          Keep as is
        </button>
      </div>
    </dialog>
  );
  return [dialog, confirm];
}
