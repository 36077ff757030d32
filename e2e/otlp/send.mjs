// Sends slurmlens records to a slurmlens server as OTLP/HTTP logs through the OpenTelemetry JS SDK and
// its stock exporters (exporter-logs-otlp-http: JSON; exporter-logs-otlp-proto: protobuf), mapped as
// docs/OTLP.md says. The records are the JSON endpoints' own batches, so a test can compare what each
// path stored.
//
//   node e2e/otlp/send.mjs <endpoint> <ingest secret> <records.json> <json|protobuf> [gzip]
//
// <endpoint> is what an exporter is configured with (`http://127.0.0.1:8080/api/v1/otlp`, or a Collector's
// OTLP/HTTP receiver `http://127.0.0.1:4318`); the SDK's `/v1/logs` is appended as the Collector's otlphttp
// exporter does. <ingest secret> `-` sends none (a Collector adds its own). <records.json> is
// `{"cluster": "lab", "traces": [TraceBatch, …], "gpu_allocations": [GpuAllocationRecord, …],
// "plain_logs": N}` (N ordinary log lines, which the server must ignore and count).
// Prints `{"exports", "failed", "warnings"}` (warnings: the SDK's, e.g. a partial success) and exits
// non-zero when an export failed.

import { readFileSync } from 'node:fs';
import { diag, DiagLogLevel } from '@opentelemetry/api';
import { BatchLogRecordProcessor, LoggerProvider } from '@opentelemetry/sdk-logs';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { OTLPLogExporter as JsonLogExporter } from '@opentelemetry/exporter-logs-otlp-http';
import { OTLPLogExporter as ProtobufLogExporter } from '@opentelemetry/exporter-logs-otlp-proto';

const [endpoint, secret, recordsFile, encoding, compression] = process.argv.slice(2);
if (!endpoint || !secret || !recordsFile || !['json', 'protobuf'].includes(encoding)) {
  console.error('usage: send.mjs <endpoint> <ingest secret> <records.json> <json|protobuf> [gzip]');
  process.exit(2);
}
const input = JSON.parse(readFileSync(recordsFile, 'utf8'));

const warnings = [];
diag.setLogger(
  {
    error: (...args) => warnings.push(`error: ${args.join(' ')}`),
    warn: (...args) => warnings.push(args.join(' ')),
    info: () => {},
    debug: () => {},
    verbose: () => {},
  },
  DiagLogLevel.WARN,
);

/** An RFC 3339 time as the SDK's [seconds, nanoseconds]. */
function hrTime(text) {
  const millis = Date.parse(text);
  if (Number.isNaN(millis)) throw new Error(`not a time: ${text}`);
  return [Math.floor(millis / 1000), (millis % 1000) * 1e6];
}

/** One logger per node: the node is the resource's host.name, as a Collector on that node sends it. */
const results = [];
const providers = new Map();
function loggerFor(node) {
  if (!providers.has(node)) {
    const Exporter = encoding === 'json' ? JsonLogExporter : ProtobufLogExporter;
    const exporter = new Exporter({
      url: `${endpoint.replace(/\/$/, '')}/v1/logs`,
      headers: secret === '-' ? {} : { Authorization: `Bearer ${secret}` },
      ...(compression === 'gzip' ? { compression: 'gzip' } : {}),
    });
    // Keeps each export's result, which the processor otherwise only logs.
    const recording = {
      export: (logs, done) => exporter.export(logs, (result) => { results.push(result); done(result); }),
      forceFlush: () => exporter.forceFlush(),
      shutdown: () => exporter.shutdown(),
    };
    const provider = new LoggerProvider({
      resource: resourceFromAttributes({
        'service.name': 'slurmlens-otlp-e2e',
        'host.name': node,
        'slurm.cluster': input.cluster,
      }),
      processors: [new BatchLogRecordProcessor({ exporter: recording, maxExportBatchSize: 512, scheduledDelayMillis: 50 })],
    });
    providers.set(node, provider);
  }
  return providers.get(node).getLogger('slurmlens-otlp-e2e', '1.0.0');
}

for (const batch of input.traces ?? []) {
  const logger = loggerFor(batch.node);
  for (const record of batch.records) {
    const attributes = {
      'process.pid': record.pid,
      'slurmlens.trace.gpu': record.gpu,
      'slurmlens.trace.interval_s': record.interval_s,
      'slurmlens.trace.category': record.category,
      'slurmlens.trace.name': record.name,
      'slurmlens.trace.count': record.count,
      'slurmlens.trace.total_ns': record.total_ns,
      'slurmlens.trace.max_ns': record.max_ns,
    };
    if (record.job_id !== undefined) attributes['slurm.job.id'] = record.job_id;
    if (record.cgroup !== undefined) attributes['slurmlens.trace.cgroup'] = record.cgroup;
    if (record.bytes) attributes['slurmlens.trace.bytes'] = record.bytes;
    logger.emit({ eventName: 'slurmlens.trace_summary', timestamp: hrTime(record.interval_start), attributes });
  }
}

for (const record of input.gpu_allocations ?? []) {
  const attributes = {
    'slurm.job.id': record.job_id,
    'slurmlens.gpu_allocation.step': record.step,
    'slurmlens.gpu_allocation.event': record.event,
    'slurmlens.gpu_allocation.gpus': record.gpus.map((gpu) => gpu.index),
  };
  if (record.gpus.some((gpu) => gpu.uuid)) {
    attributes['slurmlens.gpu_allocation.gpu_uuids'] = record.gpus.map((gpu) => gpu.uuid ?? '');
  }
  if (record.cgroup_path !== undefined) attributes['slurmlens.gpu_allocation.cgroup_path'] = record.cgroup_path;
  loggerFor(record.node).emit({ eventName: 'slurmlens.gpu_allocation', timestamp: hrTime(record.at), attributes });
}

// Ordinary log lines from the same nodes' Collectors: not slurmlens's, to be ignored and counted.
const someNode = input.traces?.[0]?.node ?? input.gpu_allocations?.[0]?.node;
for (let line = 0; line < (input.plain_logs ?? 0); line++) {
  loggerFor(someNode).emit({ body: `slurmd: plain log line ${line}`, severityText: 'INFO', severityNumber: 9 });
}

for (const provider of providers.values()) {
  await provider.forceFlush();
  await provider.shutdown();
}
// ExportResultCode.SUCCESS is 0 (@opentelemetry/core, not imported: it is the SDK's own dependency).
const failed = results.filter((result) => result.code !== 0);
console.log(JSON.stringify({
  exports: results.length,
  failed: failed.map((result) => String(result.error?.message ?? result.error ?? 'failed')),
  warnings,
}));
process.exit(failed.length === 0 && results.length > 0 ? 0 : 1);
