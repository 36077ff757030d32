// Shared helpers of the browser tests and the benchmark: Debian's Chromium through playwright-core
// (its own browser download is not used), the API, CSV parsing.
import { chromium } from 'playwright-core';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const CHROMIUM = process.env.E2E_CHROMIUM || '/usr/bin/chromium';
const FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--disable-quic', '--disable-dev-shm-usage',
];

/** A fresh browser with a fresh profile folder. */
export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), 'slurmlens-chromium-'));
  return chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: FLAGS,
    headless: true,
    viewport: { width: 1280, height: 800 },
    timezoneId: process.env.E2E_TZ || 'Asia/Tokyo',
    acceptDownloads: true,
  });
}

/** GET `base + path` and parse JSON; throws with the body on a non-2xx answer. */
export async function api(base, path) {
  const response = await fetch(base + path);
  const text = await response.text();
  if (!response.ok) throw new Error(`${path} answered ${response.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

/** Every job of a window, following the API's cursors. */
export async function allJobs(base, query) {
  const jobs = [];
  let cursor = '';
  for (;;) {
    const page = await api(base, `/api/v1/jobs?${query}&limit=5000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    jobs.push(...page.items);
    if (!page.next_cursor) return jobs;
    cursor = page.next_cursor;
  }
}

/** Waits until the wasm bundle has hydrated the page. */
export async function hydrated(page, timeout = 20000) {
  await page.waitForFunction(() => window.__slurmlensHydrated === true, null, { timeout });
}

/** Waits until the Gantt canvas shows loaded data (not hidden, status no longer loading). */
export async function ganttReady(page, timeout = 30000) {
  await page.waitForFunction(() => {
    const canvas = document.querySelector('[data-testid=gantt-canvas]');
    const status = document.querySelector('[data-testid=gantt-status]');
    return canvas && !canvas.classList.contains('hidden') && canvas.dataset.jobs !== undefined &&
      status && !status.textContent.startsWith('Loading');
  }, null, { timeout });
}

/** The Gantt canvas's data attributes. */
export async function ganttState(page) {
  return page.$eval('[data-testid=gantt-canvas]', (canvas) => ({ ...canvas.dataset }));
}

/** RFC 4180 CSV → rows of fields. */
export function parseCsv(text) {
  const rows = [];
  let row = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { field += '"'; i++; } else if (c === '"') quoted = false; else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') { row.push(field); field = ''; }
    else if (c === '\r') continue;
    else if (c === '\n') { row.push(field); rows.push(row); row = []; field = ''; }
    else field += c;
  }
  if (field !== '' || row.length) { row.push(field); rows.push(row); }
  return rows;
}

/** Whether a job held its allocation at epoch second `at`. */
export function runningAt(job, at) {
  if (!job.start) return false;
  const start = Date.parse(job.start) / 1000;
  const end = job.end ? Date.parse(job.end) / 1000 : Infinity;
  return start <= at && end > at;
}

/** `YYYY-MM-DDTHH:MM` in UTC, for a datetime-local field. */
export function formTime(epoch) {
  return new Date(epoch * 1000).toISOString().slice(0, 16);
}
