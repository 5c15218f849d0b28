// CLI for the demo: `node dist/tools/fake-engine/main.js --port 9001 --name replica-a --dialect sglang
// --family generic|<a CONTINUATION_MODEL name> --token-ms 40 [--tokenizer sglang|vllm|llamacpp]
// [--chat-template FILE|DIR [--reasoning-parser markers|none]] (serve that template: tools/fake-engine/template-model.ts)
// [--fault-scope header|request] [--prefill-ms MS] [--prefill-ms-per-concurrent MS]`. Prints one line when listening (the demo waits for it). SIGUSR1 makes it
// fall over and come back (FakeEngine.failFor): its streams are reset and it answers 503 for
// --unavailable-ms (default 3000).

import { selectFamily } from '../../src/families/select';
import { readTemplateFiles } from '../../src/templates/source';
import type { Dialect } from './dialect';
import { type FakeEngineOptions, startFakeEngine } from './server';

function parseArgs(argv: string[]): FakeEngineOptions & { unavailableMs: number } {
  const opts: FakeEngineOptions & { unavailableMs: number } = { unavailableMs: 3000 };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`missing value for ${flag}`);
    switch (flag) {
      case '--port':
        opts.port = Number(value);
        break;
      case '--host':
        opts.host = value;
        break;
      case '--name':
        opts.name = value;
        break;
      case '--model':
        opts.model = value;
        break;
      case '--token-ms':
        opts.tokenIntervalMs = Number(value);
        break;
      case '--prefill-ms':
        opts.prefillMs = Number(value);
        if (!(opts.prefillMs >= 0)) throw new Error(`bad --prefill-ms ${value}`);
        break;
      case '--prefill-ms-per-concurrent':
        opts.prefillMsPerConcurrent = Number(value);
        if (!(opts.prefillMsPerConcurrent >= 0)) throw new Error(`bad --prefill-ms-per-concurrent ${value}`);
        break;
      case '--unavailable-ms':
        opts.unavailableMs = Number(value);
        break;
      case '--revision':
        opts.revision = value;
        break;
      case '--dialect':
        if (value !== 'sglang' && value !== 'vllm') throw new Error(`bad --dialect ${value}`);
        opts.dialect = value as Dialect;
        break;
      case '--tokenizer':
        if (value !== 'sglang' && value !== 'vllm' && value !== 'llamacpp') throw new Error(`bad --tokenizer ${value}`);
        opts.tokenizer = value;
        break;
      case '--fault-scope':
        if (value !== 'header' && value !== 'request') throw new Error(`bad --fault-scope ${value}`);
        opts.faultScope = value;
        break;
      case '--family':
        if (!selectFamily(value).known) throw new Error(`bad --family ${value}: no model family of that name`);
        opts.family = value;
        break;
      case '--chat-template':
        // A .jinja file, a tokenizer_config.json or a model directory, read as CHAT_TEMPLATE reads it.
        opts.chatTemplate = { ...templateOptions(value), parser: opts.chatTemplate?.parser ?? 'markers' };
        break;
      case '--reasoning-parser':
        if (value !== 'markers' && value !== 'none') throw new Error(`bad --reasoning-parser ${value} (markers or none)`);
        opts.chatTemplate = { text: opts.chatTemplate?.text ?? '', special: opts.chatTemplate?.special, parser: value };
        break;
      default:
        throw new Error(`unknown flag ${flag}`);
    }
  }
  if (opts.chatTemplate && !opts.chatTemplate.text) throw new Error('--reasoning-parser needs --chat-template');
  return opts;
}

function templateOptions(location: string): { text: string; special: Record<string, string> } {
  const files = readTemplateFiles(location);
  const text = files.templates.default;
  if (text === undefined) throw new Error(`--chat-template ${location}: no default template`);
  return { text, special: { ...files.special } };
}

async function main(): Promise<void> {
  const opts = parseArgs(process.argv.slice(2));
  const engine = await startFakeEngine(opts);
  process.stdout.write(`FAKE_ENGINE ${engine.name} listening ${engine.url}\n`);
  const stop = () => {
    engine.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGUSR1', () => engine.failFor(opts.unavailableMs));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((e) => {
  process.stderr.write(`fake-engine: ${(e as Error).message}\n`);
  process.exit(2);
});
