// The sidecar process: validate configuration (one clear line per bad variable, exit 2), start the ext_proc
// server, print `SIDECAR listening <port>` for whoever supervises us, stop cleanly on SIGINT/SIGTERM.
import { ConfigError, loadConfig } from './config/env';
import { createLogger } from './obs/logger';
import { startSidecar } from './sidecar';

async function main(): Promise<void> {
  let config;
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
  const sidecar = await startSidecar(config, log);
  process.stdout.write(`SIDECAR listening ${sidecar.port}\n`);
  const stop = (signal: string) => {
    log.info({ signal }, 'stopping');
    void sidecar.close().then(() => {
      log.flush();
      process.exit(0);
    });
    setTimeout(() => process.exit(0), 5000).unref();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

void main().catch((e) => {
  process.stderr.write(`sidecar failed to start: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
