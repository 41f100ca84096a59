import type { Connection } from '../../userauth/user-auth.js'
import { callerLabel } from '../caller.js'
import { html, type Html } from './html.js'

/**
 * The admin listener's view of per-user tokens (docs/auth.md §Per-user credentials): which users
 * are connected to which `userAuth` servers, and when; never a token value (the store's values
 * never reach this module: userauth/user-auth.ts `connections`).
 */

/** One connected user at one server, as the store lists it (its store name is not shown). */
type ConnectedUser = Omit<Connection, 'name'>

/** Where the view reads its users, and how it names them (`admin.showSubjects`). */
export interface UserTokensView {
  list(): Promise<readonly ConnectedUser[]>
  readonly showSubjects: boolean
}

/** The rows as `/user-tokens.json` gives them: the user as the status page names callers. */
export function userTokenRows(
  users: readonly ConnectedUser[],
  showSubjects: boolean,
): Record<string, unknown>[] {
  return users.map((u) => ({
    server: u.server,
    user: u.sub === undefined ? null : callerLabel({ issuer: u.iss, subject: u.sub }, showSubjects),
    readable: u.sub !== undefined,
    connectedAt: time(u.connectedAt),
    refreshedAt: time(u.refreshedAt),
    expiresAt: time(u.expiresAt),
    refreshable: u.refreshable ?? null,
  }))
}

/** `/user-tokens`: one table, in the status page's style sheet. */
export function userTokensPage(users: readonly ConnectedUser[], showSubjects: boolean): Html {
  const rows = userTokenRows(users, showSubjects).map(
    (r) =>
      html`<tr>
        <td>${String(r['server'])}</td>
        <td>${r['readable'] === true ? String(r['user']) : 'unreadable (another key)'}</td>
        <td>${String(r['connectedAt'] ?? '–')}</td>
        <td>${String(r['refreshedAt'] ?? '–')}</td>
        <td>${String(r['expiresAt'] ?? '–')}</td>
        <td>${r['refreshable'] === true ? 'yes' : 'no'}</td>
      </tr>`,
  )
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <title>mcp-edge: connected users</title>
        <link rel="stylesheet" href="status.css" />
      </head>
      <body>
        <main>
          <h1>Connected users</h1>
          <p>Users connected to servers with <code>userAuth</code>; tokens are never shown.</p>
          <table>
            <thead>
              <tr>
                <th>server</th>
                <th>user</th>
                <th>connected</th>
                <th>refreshed</th>
                <th>access token expires</th>
                <th>refreshable</th>
              </tr>
            </thead>
            <tbody>
              ${
                rows.length === 0
                  ? html`<tr>
                      <td colspan="6">none</td>
                    </tr>`
                  : rows
              }
            </tbody>
          </table>
          <p><a href="./">status</a></p>
        </main>
      </body>
    </html>`
}

function time(ms: number | undefined): string | null {
  return ms === undefined ? null : new Date(ms).toISOString()
}
