// Browser benchmark of the two heaviest pages (e2e/browser/run.sh --bench starts the server):
//   Gantt: a window of at least 20,000 jobs on sakura's 100 nodes — first paint, interactive (hydrated
//          and the chart drawn with its data), draw time and input-to-frame time of zoom and pan;
//   Grid:  800 GPUs — first paint, interactive, scrub-to-updated time.
// Page weight per kind (HTML, wasm, JS, CSS, data) as transferred (gzip) and decoded. Prints the
// figures and writes them to OUT/bench.json.
//
//   node e2e/browser/bench.mjs BASE_URL OUT_DIR [runs]
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { api, ganttReady, hydrated, launch } from './lib.mjs';

const [base, out, runsArg] = process.argv.slice(2);
const runs = Number(runsArg || 3);
const stats = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mean = sorted.reduce((a, b) => a + b, 0) / Math.max(sorted.length, 1);
  const p95 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.95))];
  return { n: sorted.length, mean: +mean.toFixed(1), p95: +(p95 ?? 0).toFixed(1), max: +(sorted.at(-1) ?? 0).toFixed(1) };
};
const kB = (bytes) => +(bytes / 1024).toFixed(1);

/** Page weight by kind, from the navigation and resource timing entries. */
async function weight(page) {
  return page.evaluate(() => {
    const kinds = {};
    const add = (kind, entry) => {
      const k = (kinds[kind] ||= { transfer: 0, decoded: 0 });
      k.transfer += entry.transferSize || 0;
      k.decoded += entry.decodedBodySize || 0;
    };
    for (const entry of performance.getEntriesByType('navigation')) add('html', entry);
    for (const entry of performance.getEntriesByType('resource')) {
      const url = new URL(entry.name);
      const kind = url.pathname.endsWith('.wasm') ? 'wasm' : url.pathname.endsWith('.js') ? 'js'
        : url.pathname.endsWith('.css') ? 'css' : url.pathname.startsWith('/web/v1/') || url.pathname.startsWith('/api/') ? 'data' : 'other';
      add(kind, entry);
    }
    return kinds;
  });
}

/** First paint and first contentful paint, ms from navigation start. */
async function paints(page) {
  return page.evaluate(() => Object.fromEntries(performance.getEntriesByType('paint').map((p) => [p.name, +p.startTime.toFixed(1)])));
}

/** Runs `action` in the page and returns ms until the next frame is presented. */
async function inputToFrame(page, key) {
  return page.evaluate(async (key) => {
    const canvas = document.querySelector('[data-testid=gantt-canvas]');
    const t0 = performance.now();
    canvas.dispatchEvent(new KeyboardEvent('keydown', { key, bubbles: true }));
    await new Promise((resolve) => requestAnimationFrame(resolve));
    return performance.now() - t0;
  }, key);
}

/** Drags the chart by `dx` pixels in-page (mousedown, 10 moves, mouseup); ms per move until the next frame. */
async function dragFrames(page, dx) {
  return page.evaluate(async (dx) => {
    const canvas = document.querySelector('[data-testid=gantt-canvas]');
    const box = canvas.getBoundingClientRect();
    const at = (x) => ({ clientX: box.left + x, clientY: box.top + 200, buttons: 1, bubbles: true });
    const x0 = box.width / 2;
    canvas.dispatchEvent(new MouseEvent('mousedown', at(x0)));
    const times = [];
    for (let i = 1; i <= 10; i++) {
      const t0 = performance.now();
      canvas.dispatchEvent(new MouseEvent('mousemove', at(x0 + (dx * i) / 10)));
      await new Promise((resolve) => requestAnimationFrame(resolve));
      times.push(performance.now() - t0);
    }
    canvas.dispatchEvent(new MouseEvent('mouseup', at(x0 + dx)));
    return times;
  }, dx);
}

const report = { when: new Date().toISOString(), base, runs };
let context = await launch();

// --- Gantt with ≥ 20,000 jobs ------------------------------------------------------------------
const now = Math.floor(Date.now() / 1000);
let days = 3;
let loaded;
for (;;) {
  const t0 = Date.now();
  loaded = await api(base, `/web/v1/gantt?cluster=sakura&start=${now - Math.round(days * 86400)}&end=${now}`);
  report.gantt_data_ms = Date.now() - t0;
  if (loaded.job_ids.length + loaded.packed_jobs >= 20000 || days >= 10) break;
  days += 0.5;
}
const start = now - Math.round(days * 86400);
const ganttUrl = `${base}/?cluster=sakura&start=${start}&end=${now}`;
const gantt = { window_days: days, jobs: loaded.job_ids.length + loaded.packed_jobs, runs: [] };
for (let run = 0; run < runs; run++) {
  const page = await context.newPage();
  if (run === 0) await page.context().clearCookies();
  const t0 = Date.now();
  await page.goto(ganttUrl);
  await hydrated(page, 60000);
  await ganttReady(page, 60000);
  const state = await page.$eval('[data-testid=gantt-canvas]', (c) => ({ ...c.dataset }));
  const measures = {
    ...(await paints(page)),
    hydrated: await page.evaluate(() => +window.__slurmlensHydrateStart.toFixed(1)),
    interactive: Number(state.firstDrawMs),
    wall_ms: Date.now() - t0,
    jobs_drawn: Number(state.jobs),
  };
  if (run === 0) gantt.weight = await weight(page);
  // Zoom and pan: input → next frame, and the draw itself (data-frame-ms), without waiting for refetches.
  const frames = [];
  const draws = [];
  for (const key of ['ArrowRight', 'ArrowLeft', 'ArrowRight', 'ArrowLeft', '+', '-', 'ArrowRight', '+', 'ArrowLeft', '-']) {
    frames.push(await inputToFrame(page, key));
    draws.push(Number(await page.$eval('[data-testid=gantt-canvas]', (c) => c.dataset.frameMs)));
  }
  // Drag-pan with the mouse: 10 moves one way, 10 back.
  for (const dx of [-300, 300]) {
    frames.push(...(await dragFrames(page, dx)));
    draws.push(Number(await page.$eval('[data-testid=gantt-canvas]', (c) => c.dataset.frameMs)));
  }
  measures.input_to_frame = stats(frames);
  measures.draw = stats(draws);
  gantt.runs.push(measures);
  if (run === runs - 1) await page.screenshot({ path: join(out, 'bench_gantt.png') });
  await page.close();
}
report.gantt = gantt;

// --- Gantt windows of 1, 7 and 30 days, each in a fresh page (short jobs packed server-side) -----
report.windows = [];
// Each window twice: its first view (the server reads the hours of finished jobs it has not kept: none
// of the last `chart_history_days` after its start-up read, which run.sh waits for), then again in a fresh page (the server's kept hours; a window one second later, so the browser's
// cache of the first view's data is not what answers).
for (const [span, view] of [1, 7, 30].flatMap((span) => [[span, 'first view'], [span, 'again']])) {
  const page = await context.newPage();
  const end = view === 'again' ? now + 1 : now;
  const t0 = Date.now();
  await page.goto(`${base}/?cluster=sakura&start=${end - span * 86400}&end=${end}`);
  await hydrated(page, 60000);
  await ganttReady(page, 120000);
  const state = await page.$eval('[data-testid=gantt-canvas]', (c) => ({ ...c.dataset }));
  const frames = [];
  for (const key of ['ArrowRight', 'ArrowLeft', 'ArrowRight', 'ArrowLeft']) frames.push(await inputToFrame(page, key));
  const data = await page.evaluate(() => performance.getEntriesByType('resource')
    .filter((e) => new URL(e.name).pathname === '/web/v1/gantt')
    .map((e) => ({ ms: +e.duration.toFixed(1), transfer: e.transferSize, decoded: e.decodedBodySize,
      // When the data was asked for and when its last byte came, ms from navigation start: what the
      // page does after `arrived` until `interactive` is its own decoding, layout and drawing.
      asked: +e.startTime.toFixed(1), arrived: +e.responseEnd.toFixed(1) }))[0] || {});
  const hydrated_at = await page.evaluate(() => +window.__slurmlensHydrateStart.toFixed(1));
  // The page's own steps (User Timing marks the bundle sets), ms from navigation start.
  const steps = await page.evaluate(() => Object.fromEntries(performance.getEntriesByType('mark')
    .filter((m) => m.name.startsWith('slurmlens:')).map((m) => [m.name.slice(10), +m.startTime.toFixed(1)])));
  report.windows.push({
    days: span,
    view,
    ...(await paints(page)),
    hydrated: hydrated_at,
    steps,
    interactive: Number(state.firstDrawMs),
    wall_ms: Date.now() - t0,
    jobs_drawn: Number(state.jobs),
    packed_jobs: Number(state.packedJobs),
    packed_bars: Number(state.packed),
    data,
    draw_ms: Number(state.frameMs),
    input_to_frame: stats(frames),
  });
  if (view === 'again') await page.screenshot({ path: join(out, `bench_gantt_${span}d.png`) });
  await page.close();
}

// --- Grid with 800 GPUs ------------------------------------------------------------------------
await context.close();
context = await launch(); // a cold cache again, for the grid's first run
const grid = { runs: [] };
for (let run = 0; run < runs; run++) {
  const page = await context.newPage();
  const t0 = Date.now();
  await page.goto(`${base}/grid?cluster=sakura`);
  await hydrated(page, 60000);
  const cells = await page.$$eval('[data-testid=gpu-cell]', (c) => c.length);
  const measures = {
    ...(await paints(page)),
    dom_content_loaded: await page.evaluate(() => +performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd.toFixed(1)),
    hydrated: await page.evaluate(() => +window.__slurmlensHydrateStart.toFixed(1)),
    wall_ms: Date.now() - t0,
    gpu_cells: cells,
  };
  if (run === 0) grid.weight = await weight(page);
  const scrubs = [];
  for (let i = 1; i <= 5; i++) {
    const at = Math.floor(now / 60) * 60 - i * 6 * 3600;
    const t = Date.now();
    await page.$eval('[data-testid=grid-scrubber]', (input, value) => {
      input.value = String(value);
      input.dispatchEvent(new Event('input', { bubbles: true }));
    }, at);
    await page.waitForSelector(`[data-testid=grid-summary][data-at="${at}"]`, { timeout: 30000 });
    scrubs.push(Date.now() - t);
  }
  measures.scrub_to_updated = stats(scrubs);
  // Of which the grid's data request (server time and transfer), the rest being the page's own work.
  measures.scrub_data = stats(await page.evaluate(() => performance.getEntriesByType('resource')
    .filter((e) => new URL(e.name).pathname === '/web/v1/grid').map((e) => e.duration)));
  grid.runs.push(measures);
  if (run === runs - 1) await page.screenshot({ path: join(out, 'bench_grid.png') });
  await page.close();
}
report.grid = grid;
await context.close();

writeFileSync(join(out, 'bench.json'), JSON.stringify(report, null, 2));
const line = (label, value) => console.log(`  ${label.padEnd(34)} ${value}`);
const weights = (w) => Object.entries(w).map(([k, v]) => `${k} ${kB(v.transfer)} kB (${kB(v.decoded)} kB decoded)`).join(', ');
const total = (w) => kB(Object.values(w).reduce((a, v) => a + v.transfer, 0));
console.log(`Gantt: ${gantt.jobs} jobs in a ${days}-day window on 100 nodes (server assembles it in ${report.gantt_data_ms} ms)`);
for (const [i, r] of gantt.runs.entries()) {
  line(`run ${i + 1} (${i ? 'warm' : 'cold'} cache)`, `first paint ${r['first-paint']} ms, hydrated ${r.hydrated} ms, interactive (chart drawn with its data) ${r.interactive} ms`);
  line('  zoom/pan/drag input → next frame', `mean ${r.input_to_frame.mean} ms, p95 ${r.input_to_frame.p95} ms, max ${r.input_to_frame.max} ms (n=${r.input_to_frame.n})`);
  line('  draw (canvas, all bars)', `mean ${r.draw.mean} ms, p95 ${r.draw.p95} ms, max ${r.draw.max} ms`);
}
line('page weight', `${total(gantt.weight)} kB transferred: ${weights(gantt.weight)}`);
for (const w of report.windows) {
  console.log(`Gantt, ${w.days} d, ${w.view}: ${w.jobs_drawn} jobs drawn, ${w.packed_jobs} more in ${w.packed_bars} packed bars; data ${w.data.ms} ms, ${kB(w.data.transfer)} kB (${kB(w.data.decoded)} kB decoded)`);
  line('  first paint, interactive', `${w['first-paint']} ms, ${w.interactive} ms (chart drawn with its data); draw ${w.draw_ms} ms; pan input → next frame mean ${w.input_to_frame.mean} ms, max ${w.input_to_frame.max} ms`);
  const at = (step) => w.steps[step] ?? '-';
  line('  steps (ms from navigation)', `data asked ${w.data.asked}, in ${w.data.arrived}; hydrated ${at('hydrated')}; body in the bundle ${at('body /web/v1/gantt')}, parsed ${at('parsed /web/v1/gantt')}, indexed ${at('gantt indexed')}, first draw ${at('gantt first draw')}`);
}
console.log(`Grid: 800 GPUs (${grid.runs[0].gpu_cells} cells)`);
for (const [i, r] of grid.runs.entries()) {
  line(`run ${i + 1} (${i ? 'warm' : 'cold'} cache)`, `first paint ${r['first-paint']} ms, DOMContentLoaded ${r.dom_content_loaded} ms, hydrated ${r.hydrated} ms`);
  line('  scrub → grid updated', `mean ${r.scrub_to_updated.mean} ms, max ${r.scrub_to_updated.max} ms; its data request mean ${r.scrub_data.mean} ms (n=${r.scrub_data.n})`);
}
line('page weight', `${total(grid.weight)} kB transferred: ${weights(grid.weight)}`);
