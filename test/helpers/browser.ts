import { existsSync } from 'node:fs'
import { chromium, type Browser, type Page } from 'playwright-core'
import { onTestFinished } from 'vitest'

/** Debian's chromium (.ci/run installs it), or CHROMIUM_PATH. */
export const CHROMIUM =
  process.env.CHROMIUM_PATH ??
  ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p))
export const MISSING_CHROMIUM =
  'chromium is not installed (Debian package chromium; .ci/run installs it), or set CHROMIUM_PATH'

/** What a page did that a test must see: console errors, CSP violations, uncaught errors. */
export interface PageTrouble {
  readonly console: string[]
  readonly csp: string[]
  readonly errors: string[]
  readonly dialogs: string[]
  /** Main-frame navigations so far (set it to 0 once the page is up: a reload would be one). */
  navigations: number
}

/** A headless Chromium, closed after the test (no sandbox: CI runs as root). */
export async function launchChromium(): Promise<Browser> {
  if (CHROMIUM === undefined) throw new Error(MISSING_CHROMIUM)
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  })
  onTestFinished(() => browser.close())
  return browser
}

/**
 * A page that records its trouble: every console error, every Content-Security-Policy violation
 * (the `securitypolicyviolation` event, listened to before any page script runs), every uncaught
 * error and every dialog (an `alert` from injected markup would be one; dismissed).
 */
export async function watchedPage(browser: Browser): Promise<{ page: Page; trouble: PageTrouble }> {
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 } })
  const page = await context.newPage()
  const trouble: PageTrouble = { console: [], csp: [], errors: [], dialogs: [], navigations: 0 }
  await page.exposeFunction('__cspViolation', (text: string) => trouble.csp.push(text))
  // A string: it runs in the page, whose types this project does not compile against.
  await page.addInitScript(
    "document.addEventListener('securitypolicyviolation', (e) => window.__cspViolation(e.violatedDirective + ' ' + e.blockedURI))",
  )
  page.on('console', (msg) => {
    if (msg.type() === 'error') trouble.console.push(msg.text())
  })
  page.on('pageerror', (err) => trouble.errors.push(err.message))
  page.on('framenavigated', (frame) => {
    if (frame === page.mainFrame()) trouble.navigations++
  })
  page.on('dialog', (dialog) => {
    trouble.dialogs.push(dialog.message())
    void dialog.dismiss()
  })
  return { page, trouble }
}
