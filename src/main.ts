// The sidecar process: validate configuration (one clear line per bad variable, exit 2), start the ext_proc
// server, print `SIDECAR listening <port> admin <admin port>` for whoever supervises us. SIGTERM drains (health NOT_SERVING,
// new requests passed through, streams in flight finish within DRAIN_TIMEOUT_SECONDS) and exits; SIGINT, or a
// second signal, closes at once.

import { runPrimary } from './cluster/primary';
import { isClusterWorker, serveAsWorker, workerAdmission } from './cluster/worker';
import { CONFIG_VARIABLES, ConfigError, type GatewayConfig, loadConfig } from './config/env';
import { nearMisses } from './config/unknown-vars';
import { createLogger } from './obs/logger';
import { startSidecar } from './sidecar';

async function main(): Promise<void> {
  let config: GatewayConfig;
  try {
    config = loadConfig(process.env);
  } catch (e) {
    if (e instanceof ConfigError) {
      for (const p of e.problems) process.stderr.write(`${p}\n`);
      process.exit(2);
    }
    throw e;
  }
  const log = createLogger(config.logLevel);
  // A misspelled variable would be ignored without a word (src/config/unknown-vars.ts); workers stay quiet.
  if (!isClusterWorker())
    for (const m of nearMisses(Object.keys(process.env), CONFIG_VARIABLES))
      log.warn(
        { decision: 'CONFIG_UNKNOWN_VARIABLE', variable: m.variable, did_you_mean: m.didYouMean },
        `${m.variable} is not a variable the sidecar reads (ignored); did you mean ${m.didYouMean}?`,
      );
  if (config.workers > 1 && !isClusterWorker()) {
    // WORKERS processes share the gRPC port; this one supervises them and serves the admin port.
    await runPrimary(config, log.child({ role: 'primary' }), (port, adminPort) =>
      process.stdout.write(`SIDECAR listening ${port} admin ${adminPort}\n`),
    );
    return;
  }
  const worker = isClusterWorker();
  const sidecar = await startSidecar(config, worker ? log.child({ worker: process.pid }) : log, {
    admin: !worker,
    admission: worker ? workerAdmission : undefined,
  });
  if (worker) serveAsWorker(sidecar);
  let stopping = false;
  const stop = (signal: string) => {
    const drain = signal === 'SIGTERM' && !stopping;
    const second = stopping;
    stopping = true;
    log.info({ signal, drain, drain_timeout_ms: drain ? config.drainTimeoutMs : 0 }, 'stopping');
    const exit = () => {
      log.flush();
      process.exit(0);
    };
    if (second) {
      void sidecar.close(1000).finally(exit);
      setTimeout(exit, 1500).unref();
      return;
    }
    void (drain ? sidecar.drain(config.drainTimeoutMs) : sidecar.close()).then(exit, exit);
    setTimeout(exit, (drain ? config.drainTimeoutMs : 0) + 5000).unref();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  // Announced once the signal handlers are in place: a supervisor that sends SIGTERM as soon as it reads this
  // line gets a drain, not Node's default exit (seen in test/unit/obs/tracing.test.ts).
  if (!worker) process.stdout.write(`SIDECAR listening ${sidecar.port} admin ${sidecar.adminPort}\n`);
}

void main().catch((e) => {
  // A file named by a variable that only loading could judge (TOKENIZER): one line naming it, as loadConfig's.
  if (e instanceof ConfigError) {
    for (const p of e.problems) process.stderr.write(`${p}\n`);
    process.exit(2);
  }
  process.stderr.write(`sidecar failed to start: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
