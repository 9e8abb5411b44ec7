/**
 * The edit form of an endpoint's page: the settings updateEndpoint changes besides its limits, only
 * those of its kind (an HTTP target's URL, method, headers and timeout; a HANDLER's handler name).
 * A save sends only the fields changed, in one mutation (it fully happens or not at all); a value
 * the API refuses is said at its field, and a refusal no field owns under the form.
 */
import { useState, type ReactNode } from 'react';
import { graphql } from '../gql/index.ts';
import type { EndpointKind, EndpointSettingsFragment, HttpMethod, UpdateEndpointInput } from '../gql/graphql.ts';
import { ApiError } from '../lib/api.ts';
import { useMutation } from '../lib/hooks.ts';
import { ErrorBox } from '../ui/common.tsx';
import { useDraft } from './endpoints.tsx';

graphql(`
  fragment EndpointSettings on Endpoint {
    id
    name
    kind
    description
    url
    method
    headers
    timeoutMs
    handlerName
    maxAttempts
    backoffBaseMs
    backoffMaxMs
    jitter
    defaultPriority
  }
`);

const UpdateEndpointSettingsDocument = graphql(`
  mutation UpdateEndpointSettings($input: UpdateEndpointInput!) {
    updateEndpoint(input: $input) {
      ...EndpointSettings
      updatedAt
    }
  }
`);

/** The fields of the form, each as typed (text), by the name of its updateEndpoint input field. */
type Draft = {
  description: string;
  url: string;
  method: string;
  headers: string;
  timeoutMs: string;
  handlerName: string;
  maxAttempts: string;
  backoffBaseMs: string;
  backoffMaxMs: string;
  jitter: string;
  defaultPriority: string;
};
type Field = keyof Draft;

const text = (n: number | string | null | undefined) => (n == null ? '' : String(n));

/** The endpoint's settings as the form shows them. */
function draftOf(e: EndpointSettingsFragment): Draft {
  const headers = (e.headers ?? {}) as Record<string, unknown>;
  return {
    description: text(e.description),
    url: text(e.url),
    method: e.method ?? 'POST',
    headers: Object.keys(headers).length === 0 ? '' : JSON.stringify(headers, null, 2),
    timeoutMs: text(e.timeoutMs),
    handlerName: text(e.handlerName),
    maxAttempts: text(e.maxAttempts),
    backoffBaseMs: text(e.backoffBaseMs),
    backoffMaxMs: text(e.backoffMaxMs),
    jitter: String(e.jitter),
    defaultPriority: text(e.defaultPriority),
  };
}

/** A field's text as updateEndpoint takes it: empty is null (the default, or none) for what may be. */
function valueOf(field: Field, typed: string): unknown {
  switch (field) {
    case 'description':
      return typed === '' ? null : typed;
    case 'url':
    case 'handlerName':
    case 'method':
      return typed;
    case 'jitter':
      return typed === 'true';
    case 'headers':
      if (typed.trim() === '') return {};
      try {
        return JSON.parse(typed) as unknown;
      } catch {
        throw new ApiError('VALIDATION_FAILED', 'headers: is not JSON', [
          { path: ['headers'], message: 'is not JSON: an object of name to value' },
        ]);
      }
    default:
      return typed === '' ? null : Number(typed);
  }
}

/** The input of a save: the fields that differ from the server's value, and only those. */
function inputOf(id: string, draft: Draft, saved: Draft): UpdateEndpointInput {
  const input: Record<string, unknown> = { id };
  for (const field of Object.keys(draft) as Field[]) if (draft[field] !== saved[field]) input[field] = valueOf(field, draft[field]);
  return input as unknown as UpdateEndpointInput;
}

/** The refusal of each field it names, and what no shown field owns. */
function placeRefusal(error: ApiError | null, shown: readonly Field[]): { at: Partial<Record<Field, ApiError>>; rest: ApiError | null } {
  if (!error) return { at: {}, rest: null };
  const at: Partial<Record<Field, ApiError>> = {};
  const unplaced = error.issues.filter((i) => !shown.includes(i.path[0] as Field));
  for (const field of shown) {
    const mine = error.issues.filter((i) => i.path[0] === field);
    if (mine.length) at[field] = new ApiError(error.code, mine.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  }
  const placed = Object.keys(at).length > 0;
  return { at, rest: !placed ? error : unplaced.length ? new ApiError(error.code, error.message, unplaced) : null };
}

const HTTP_FIELDS: readonly Field[] = ['url', 'method', 'headers', 'timeoutMs'];
const COMMON_FIELDS: readonly Field[] = ['description', 'maxAttempts', 'backoffBaseMs', 'backoffMaxMs', 'jitter', 'defaultPriority'];

export function EditEndpoint({ endpoint, onDone }: { endpoint: EndpointSettingsFragment; onDone(): void }) {
  const update = useMutation(UpdateEndpointSettingsDocument);
  const saved = draftOf(endpoint);
  const { draft, edit, settle, changed } = useDraft(saved);
  const [local, setLocal] = useState<ApiError | null>(null);
  const [done, setDone] = useState(false);
  const shown = endpoint.kind === 'HTTP' ? [...HTTP_FIELDS, ...COMMON_FIELDS] : ['handlerName' as const, ...COMMON_FIELDS];
  // A refusal concerns the values typed: put back as saved, the form has nothing to be refused.
  const { at, rest } = placeRefusal(changed ? (local ?? update.error) : null, shown);
  const onChange = (name: Field) => (value: string) => {
    setDone(false);
    edit({ ...draft, [name]: value });
  };
  const field = (name: Field, label: string, control: (props: ControlProps) => ReactNode) => (
    <FormField name={name} label={label} error={at[name]} control={control}>
      {{ value: draft[name], onChange: onChange(name) }}
    </FormField>
  );
  return (
    <form
      className="form"
      aria-labelledby="edit-title"
      data-testid="endpoint-edit"
      onSubmit={async (ev) => {
        ev.preventDefault();
        setLocal(null);
        let input: UpdateEndpointInput;
        try {
          input = inputOf(endpoint.id, draft, saved);
        } catch (error) {
          return setLocal(error as ApiError);
        }
        const r = await update.run({ input });
        if (r) {
          settle(draft, draftOf(r.updateEndpoint));
          setDone(true);
          onDone();
        }
      }}
    >
      <h2 id="edit-title">Edit</h2>
      <Fields kind={endpoint.kind} field={field} />
      <ErrorBox error={rest} title="Not changed" />
      {done && !changed && (
        <p className="ok" role="status">
          Saved.
        </p>
      )}
      <p>
        <button type="submit" disabled={!changed || update.pending}>
          Save changes
        </button>
      </p>
    </form>
  );
}

type ControlProps = {
  id: string;
  value: string;
  onChange(ev: { target: { value: string } }): void;
  'aria-invalid'?: true;
  'aria-describedby'?: string;
};

/** A labelled control, and under it, named by it, the refusal of its value. */
function FormField({
  name,
  label,
  error,
  control,
  children: state,
}: {
  name: Field;
  label: string;
  error: ApiError | undefined;
  control(props: ControlProps): ReactNode;
  children: { value: string; onChange(value: string): void };
}) {
  const id = `endpoint-edit-${name}`;
  const errorId = `${id}-error`;
  return (
    <div className="form-field">
      <label htmlFor={id}>{label}</label>
      {control({
        id,
        value: state.value,
        onChange: (ev) => state.onChange(ev.target.value),
        ...(error ? { 'aria-invalid': true, 'aria-describedby': errorId } : {}),
      })}
      {error && (
        <div id={errorId} className="field-error" data-testid={`${name}-error`}>
          <ErrorBox error={error} title="Not changed" />
        </div>
      )}
    </div>
  );
}

type FieldOf = (name: Field, label: string, control: (props: ControlProps) => ReactNode) => ReactNode;

/** The form's fields: an HTTP target's or a handler's, then those of every endpoint. */
function Fields({ kind, field }: { kind: EndpointKind; field: FieldOf }) {
  return (
    <>
      {kind === 'HTTP' ? (
        <>
          {field('url', 'URL', (p) => (
            <input type="url" required {...p} />
          ))}
          {field('method', 'Method', (p) => (
            <select {...p}>
              {(['POST', 'PUT', 'PATCH', 'GET', 'DELETE'] satisfies HttpMethod[]).map((m) => (
                <option key={m}>{m}</option>
              ))}
            </select>
          ))}
          {field('headers', 'Extra headers (a JSON object of name to value; empty: none)', (p) => (
            <textarea rows={3} spellCheck={false} {...p} />
          ))}
          {field('timeoutMs', 'Timeout per attempt, in milliseconds (empty: the default)', (p) => (
            <input type="number" inputMode="numeric" {...p} />
          ))}
        </>
      ) : (
        field('handlerName', 'Handler name', (p) => <input required {...p} />)
      )}
      {field('description', 'Description (empty: none)', (p) => (
        <input {...p} />
      ))}
      {field('maxAttempts', 'Max attempts, 1 to 100 (empty: the default)', (p) => (
        <input type="number" inputMode="numeric" {...p} />
      ))}
      {field('backoffBaseMs', 'First retry delay, in milliseconds', (p) => (
        <input type="number" inputMode="numeric" required {...p} />
      ))}
      {field('backoffMaxMs', 'Longest retry delay, in milliseconds', (p) => (
        <input type="number" inputMode="numeric" required {...p} />
      ))}
      {field('jitter', 'Retry delays', (p) => (
        <select {...p}>
          <option value="true">randomised (jitter)</option>
          <option value="false">exact (no jitter)</option>
        </select>
      ))}
      {field('defaultPriority', 'Default priority, -100 to 100 (empty: 0)', (p) => (
        <input type="number" inputMode="numeric" {...p} />
      ))}
    </>
  );
}
