import { html, type Html } from './html.js'

/** The sign-in page: the answer of a page request without a session, and of a failed sign-in. */
export function signInPage(message: string): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <title>mcp-edge status: sign in</title>
        <link rel="icon" href="favicon.svg" type="image/svg+xml" />
        <link rel="stylesheet" href="status.css" />
      </head>
      <body>
        <main class="login">
          <section>
            <h2>mcp-edge status</h2>
            <p>This admin listener needs its token (<code>admin.token</code>).</p>
            ${message === '' ? '' : html`<p class="bad">${message}</p>`}
            <form method="post" action="login">
              <label
                >Token <input type="password" name="token" autocomplete="current-password" required
              /></label>
              <button type="submit">Sign in</button>
            </form>
          </section>
        </main>
      </body>
    </html> `
}

/** The page when no process answered (every worker restarting) or the model failed. */
export function errorPage(why: string): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <title>mcp-edge status</title>
        <link rel="icon" href="favicon.svg" type="image/svg+xml" />
        <link rel="stylesheet" href="status.css" />
      </head>
      <body>
        <main>
          <section>
            <h2>Status unavailable</h2>
            <p>${why}; try again in a moment.</p>
          </section>
        </main>
      </body>
    </html> `
}
