// The sidecar process: validate configuration (one clear line per bad variable, exit 2), start the ext_proc
// server, print `SIDECAR listening <port> admin <admin port>` for whoever supervises us. SIGTERM drains (health NOT_SERVING,
// new requests passed through, streams in flight finish within DRAIN_TIMEOUT_SECONDS) and exits; SIGINT, or a
// second signal during the drain, ends every open stream at once with the interruption event and exits; a
// signal after that exits at once (src/lifecycle/stop-ladder.ts).

import { runPrimary } from './cluster/primary';
import { isClusterWorker, serveAsWorker, workerAdmission } from './cluster/worker';
import { CONFIG_VARIABLES, ConfigError, type GatewayConfig, loadConfig } from './config/env';
import { nearMisses } from './config/unknown-vars';
import { nextStopLevel, type StopLevel } from './lifecycle/stop-ladder';
import { createLogger, type Logger } from './obs/logger';
import { SHUTDOWN_GRACE_MS, type Sidecar, startSidecar } from './sidecar';

/** A stop that has not ended the process by its own deadline plus this does (a wedged close). */
const EXIT_SLACK_MS = 5000;

/** Acts on each step of the stop ladder (src/lifecycle/stop-ladder.ts); the process exits when it is done. */
function stopper(sidecar: Sidecar, config: GatewayConfig, log: Logger): (level: StopLevel) => void {
  const exit = (): void => {
    log.flush();
    process.exit(0);
  };
  return (level) => {
    if (level === 'draining') {
      void sidecar.drain(config.drainTimeoutMs).then(exit, exit);
      setTimeout(exit, config.drainTimeoutMs + EXIT_SLACK_MS).unref();
    } else if (level === 'stopping-now') {
      void sidecar.stopNow().then(exit, exit);
      setTimeout(exit, SHUTDOWN_GRACE_MS + EXIT_SLACK_MS).unref();
    } else if (level === 'exiting') {
      void sidecar.close(1000).finally(exit);
      setTimeout(exit, 1500).unref();
    }
  };
}

async function main(): Promise<void> {
  // A cluster worker is stopped by its primary (over IPC), never by a signal of its own: from its first moment,
  // so that a signal sent to the whole process group while it starts does not end it either.
  if (isClusterWorker()) for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => undefined);
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
  const stop = stopper(sidecar, config, log);
  if (worker) {
    // Driven by the primary only: a signal sent to the whole process group reaches every worker too, and the
    // primary passes the stop on, so the worker's own copy is ignored (it never counts twice).
    serveAsWorker(sidecar, (level) => {
      log.info({ stop: level }, 'stopping (told by the primary)');
      stop(level);
    });
  } else {
    let level: StopLevel = 'running';
    const onSignal = (signal: NodeJS.Signals): void => {
      level = nextStopLevel(level, signal);
      log.info({ signal, stop: level, drain_timeout_ms: level === 'draining' ? config.drainTimeoutMs : 0 }, 'stopping');
      stop(level);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  }
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
