import { chromium } from 'playwright-core';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
const [base, job, out] = process.argv.slice(2);
for (const width of [390, 1024, 1440]) {
  const ctx = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), 'fit-')), {
    executablePath: '/usr/bin/chromium', headless: true, viewport: { width, height: 900 }, timezoneId: 'Europe/Berlin',
    args: ['--headless', '--no-sandbox', '--disable-gpu'],
  });
  const page = await ctx.newPage();
  for (const [name, path] of [['gantt', '/?cluster=sakura'], ['grid', '/grid?cluster=sakura'], ['jobs', '/jobs?cluster=sakura'], ['job', `/jobs/${job}?cluster=sakura`], ['tokens', '/tokens']]) {
    await page.goto(base + path);
    await page.waitForFunction(() => window.__slurmlensHydrated === true, null, { timeout: 30000 }).catch(() => {});
    await page.waitForTimeout(2500);
    const [scroll, client] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
    const header = await page.evaluate(() => document.querySelector('header.top').getBoundingClientRect().height);
    console.log(`${width} ${name}: page ${scroll}/${client} px wide${scroll > client ? ' SIDEWAYS' : ''}, header ${header.toFixed(0)} px`);
    await page.screenshot({ path: join(out, `fit-${name}-${width}.png`), fullPage: name !== 'job' });
  }
  await ctx.close();
}
