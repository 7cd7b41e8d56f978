// statuspage.cjs loads Spillway's status page in Debian's headless
// Chromium through playwright-core, checks that it shows live values, and
// takes screenshots. Run by TestStatusPageInBrowser:
//
//   node statuspage.cjs MODULES URL OUTDIR PROFILEDIR MINSAMPLES
//
// It prints one JSON object on stdout; any failure exits 1 with the reason
// on stderr.
'use strict';
const [, , modules, url, outDir, profileDir, minSamples] = process.argv;
const { chromium } = require(modules + '/playwright-core');
const path = require('path');

function fail(msg) { throw new Error(msg); }

(async () => {
  // The machine has no network: every feature that would call out is off.
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1366, height: 900 },
  });
  try {
    const page = context.pages()[0] || await context.newPage();
    const origin = new URL(url).origin;
    const foreign = [];
    page.on('request', (r) => { if (!r.url().startsWith(origin) && !r.url().startsWith('data:')) foreign.push(r.url()); });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });

    await page.goto(url, { waitUntil: 'load' });
    await page.waitForFunction(() => document.querySelectorAll('#partitions tbody tr').length > 0 &&
      document.querySelectorAll('#gauge .seg').length > 0, null, { timeout: 60000 });
    const look = () => page.evaluate(() => ({
      used: document.getElementById('budget-used').textContent,
      segments: [...document.querySelectorAll('#gauge .seg')].map((s) => s.dataset.holder + '=' + s.style.width),
      holders: [...document.querySelectorAll('#holders li')].map((l) => l.dataset.holder),
      rows: [...document.querySelectorAll('#partitions tbody tr')].map((tr) =>
        [...tr.children].map((td) => td.textContent.trim())),
      ready: document.getElementById('ready-pill').textContent,
      health: document.getElementById('health-pill').textContent,
      closes: document.querySelectorAll('#closes li').length,
    }));
    const first = await look();
    // Both the gauge and the table must change while Spillway consumes.
    await page.waitForFunction((f) => {
      const used = document.getElementById('budget-used').textContent;
      const segs = [...document.querySelectorAll('#gauge .seg')].map((s) => s.dataset.holder + '=' + s.style.width).join();
      const rows = [...document.querySelectorAll('#partitions tbody tr')].map((tr) => tr.textContent).join();
      return (used !== f.used || segs !== f.segments.join()) && rows !== f.rows.map((r) => r.join('')).join();
    }, first, { timeout: 90000, polling: 250 });
    const second = await look();

    // Enough throughput history for the chart, then the screenshots.
    await page.waitForFunction((n) => Number(document.getElementById('chart').dataset.samples) >= n,
      Number(minSamples), { timeout: 180000, polling: 500 });
    await page.waitForTimeout(300);
    await page.screenshot({ path: path.join(outDir, 'status-desktop.png') });
    const desktopOverflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);

    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(2500); // one refresh at the new size
    await page.screenshot({ path: path.join(outDir, 'status-phone.png') });
    const phoneOverflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);

    if (foreign.length) fail('the page fetched from elsewhere: ' + foreign.join(', '));
    if (errors.length) fail('the page logged errors: ' + errors.join('; '));
    process.stdout.write(JSON.stringify({ first, second, desktopOverflow, phoneOverflow }) + '\n');
  } finally {
    await context.close();
  }
})().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exit(1);
});
