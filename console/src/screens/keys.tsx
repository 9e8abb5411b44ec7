import { useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { Role } from '../gql/graphql.ts';
import { useCan, useMutation, useQuery, useSession } from '../lib/hooks.ts';
import { Empty, ErrorBox, Loading, Status, Time } from '../ui/common.tsx';
import { useConfirm } from '../ui/confirm.tsx';

const KeysDocument = graphql(`
  query Keys {
    apiKeys {
      id
      name
      role
      prefix
      installationAdmin
      createdAt
      lastUsedAt
      revokedAt
    }
  }
`);
const CreateKeyDocument = graphql(`
  mutation CreateKey($input: CreateApiKeyInput!) {
    createApiKey(input: $input) {
      key
      apiKey {
        id
        name
        role
      }
    }
  }
`);
const RevokeKeyDocument = graphql(`
  mutation RevokeKey($id: ID!) {
    revokeApiKey(id: $id) {
      id
      revokedAt
    }
  }
`);

export function KeysScreen() {
  const can = useCan();
  const { viewer } = useSession();
  const q = useQuery(KeysDocument, {}, { skip: !can('ADMIN') });
  const create = useMutation(CreateKeyDocument);
  const revoke = useMutation(RevokeKeyDocument);
  const [name, setName] = useState('');
  const [role, setRole] = useState<Role>('VIEWER');
  const [created, setCreated] = useState<{ name: string; key: string } | null>(null);
  const [confirmDialog, confirm] = useConfirm();
  if (!can('ADMIN')) return <Empty>API keys are managed by ADMIN keys.</Empty>;
  return (
    <section aria-labelledby="keys-title">
      <h1 id="keys-title">API keys</h1>
      {confirmDialog}
      <form
        className="form"
        aria-labelledby="create-key-title"
        onSubmit={async (e) => {
          e.preventDefault();
          const r = await create.run({ input: { name, role } });
          if (r) {
            setCreated({ name: r.createApiKey.apiKey.name, key: r.createApiKey.key });
            setName('');
            q.reload();
          }
        }}
      >
        <h2 id="create-key-title">Create a key</h2>
        <label>
          Name
          <input value={name} onChange={(e) => setName(e.target.value)} required />
        </label>
        <label>
          Role
          <select value={role} onChange={(e) => setRole(e.target.value as Role)}>
            <option>VIEWER</option>
            <option>OPERATOR</option>
            <option>ADMIN</option>
          </select>
        </label>
        <ErrorBox error={create.error} title="Not created" />
        <button type="submit" disabled={create.pending}>
          Create key
        </button>
      </form>
      {created && (
        <div className="once" role="status">
          <p>
            The key <strong>{created.name}</strong>, shown this once: copy it now, it cannot be shown again.
          </p>
          <code data-testid="new-key">{created.key}</code>{' '}
          <button type="button" onClick={() => setCreated(null)}>
            I have copied it
          </button>
        </div>
      )}
      <ErrorBox error={revoke.error} title="Not revoked" />
      <ErrorBox error={q.error} />
      {!q.data ? (
        !q.error && <Loading />
      ) : (
        <table data-testid="keys">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Prefix</th>
              <th scope="col">Role</th>
              <th scope="col">Created</th>
              <th scope="col">Last used</th>
              <th scope="col">State</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {q.data.apiKeys.map((k) => (
              <tr key={k.id}>
                <th scope="row">
                  {k.name}
                  {k.id === viewer.apiKey?.id && <span className="muted"> (this key)</span>}
                </th>
                <td>
                  <code>{k.prefix}…</code>
                </td>
                <td>{k.role}</td>
                <td>
                  <Time iso={k.createdAt} />
                </td>
                <td>
                  <Time iso={k.lastUsedAt} />
                </td>
                <td>{k.revokedAt ? <Status value="REVOKED" /> : <Status value="ACTIVE" />}</td>
                <td>
                  {!k.revokedAt && (
                    <button
                      type="button"
                      className="danger"
                      aria-label={`Revoke key ${k.name}`}
                      onClick={async () => {
                        const ok = await confirm({
                          message: `Revoke the key "${k.name}"? It stops working at once, live streams included.`,
                          action: 'Revoke key',
                        });
                        if (ok && (await revoke.run({ id: k.id }))) q.reload();
                      }}
                    >
                      Revoke
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
