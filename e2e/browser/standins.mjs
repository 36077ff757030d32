// Stand-ins for VictoriaLogs and Grafana Pyroscope, for the browser tests only: neither server is in a
// package registry this machine can reach. One HTTP server on loopback answers both documented APIs in
// their recorded formats — `GET /select/logsql/query` with JSON lines (`_time`, `_msg`, `_stream`, fields)
// and `GET /pyroscope/render?format=json` with flamebearer JSON — from lines shaped after the query it
// received: for each node named in the query's node filter, a node's kernel, NCCL and slurmd lines inside
// the query's `_time` window. It writes its base URL to the file named by its argument.
//
//   node e2e/browser/standins.mjs URL_FILE
import { createServer } from 'node:http';
import { writeFileSync } from 'node:fs';

const [urlFile] = process.argv.slice(2);

/** Nodes named by the query's node filter: `host:in("a", "b")` or `host:="a"`. */
function nodesOf(query) {
  const list = query.match(/:in\(([^)]*)\)/);
  const text = list ? list[1] : (query.match(/:="((?:[^"\\]|\\.)*)"/) || [])[1] || '';
  return [...text.matchAll(/"((?:[^"\\]|\\.)*)"|([^",\s]+)/g)].map((m) => m[1] ?? m[2]).filter(Boolean);
}

/** The query's `_time:[start, end]` window in ms. */
function windowOf(query) {
  const m = query.match(/_time:\[([^,\]]+),\s*([^\]]+)\]/);
  if (!m) return null;
  const [start, end] = [Date.parse(m[1].trim()), Date.parse(m[2].trim())];
  return Number.isFinite(start) && Number.isFinite(end) ? { start, end } : null;
}

function logLines(query, limit) {
  const window = windowOf(query);
  if (!window) return [];
  const at = (ms) => new Date(ms).toISOString().replace('Z', '000000Z');
  const lines = [];
  for (const [i, node] of nodesOf(query).entries()) {
    const stream = `{host="${node}",unit="kernel"}`;
    const entry = (ms, msg, unit = 'kernel') => ({
      _time: at(ms), _msg: msg, _stream: stream.replace('kernel', unit), _stream_id: `0000-${node}-${unit}`,
      host: node, unit,
    });
    lines.push(entry(window.start + 61000, `slurmd[${4100 + i}]: launch task StepId=batch request from UID:1001`, 'slurmd'));
    lines.push(entry(window.start + 90000, 'NCCL INFO Channel 00/32 : 0[0] -> 1[1] via P2P/IPC/read', 'job'));
    lines.push(entry(window.end - 65000, 'NVRM: Xid (PCI:0000:3b:00): 79, pid=2231, name=python, GPU has fallen off the bus.'));
    lines.push(entry(window.end - 64000, 'mlx5_core 0000:5e:00.0: mlx5e_port_change_link: Link down'));
  }
  lines.sort((a, b) => a._time.localeCompare(b._time));
  return lines.slice(-limit);
}

/** A small CPU profile of a PyTorch data loader and its training loop, in flamebearer form. */
function flamebearer() {
  const names = ['total', 'python', 'DataLoader.__next__', 'PIL.Image.decode', 'jpeg_decode', 'train_step', 'cudaLaunchKernel'];
  // Each level: [offset, total, self, name] quadruples, offsets relative to the previous bar's end.
  const levels = [
    [0, 1000, 0, 0],
    [0, 1000, 40, 1],
    [0, 700, 100, 2, 0, 260, 60, 5],
    [0, 600, 150, 3, 100, 200, 200, 6],
    [0, 450, 450, 4],
  ];
  return { version: 1, flamebearer: { names, levels, numTicks: 1000, maxSelf: 450 }, metadata: { format: 'single', units: 'samples', name: 'process_cpu', spyName: 'ebpfspy', sampleRate: 100 } };
}

const server = createServer((req, res) => {
  const url = new URL(req.url, 'http://standin');
  const query = url.searchParams.get('query');
  if (url.pathname === '/select/logsql/query' && query) {
    const limit = Number(url.searchParams.get('limit') || 1000);
    res.writeHead(200, { 'content-type': 'application/stream+json' });
    res.end(logLines(query, limit).map((line) => `${JSON.stringify(line)}\n`).join(''));
  } else if (url.pathname === '/pyroscope/render' && query && url.searchParams.get('format') === 'json') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(flamebearer()));
  } else {
    res.writeHead(400, { 'content-type': 'text/plain' });
    res.end('not a request these stand-ins answer');
  }
});
server.listen(0, '127.0.0.1', () => writeFileSync(urlFile, `http://127.0.0.1:${server.address().port}`));
