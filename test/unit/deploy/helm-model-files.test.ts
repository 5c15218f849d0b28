// The served chat template and the model's tokenizer from the chart (issues 26 and 27): chatTemplate (auto, a
// ConfigMap, a path), tokenizer.path and modelVolume, in both modes. Each form sets CHAT_TEMPLATE / TOKENIZER, the
// volume and its read-only mount in the sidecar; the sidecar's own configuration accepts what the chart renders
// (the Qwen3 model directory of scripts/tokenizer-assets.sh as the mounted volume); contradictions, typos and a
// memory limit too small for the tokenizer are refused, saying why.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadConfig } from '../../../src/config/env';
import { CHART, docsOfYaml, provisionHelm, ROOT, run, venvTool } from '../../support/helm';

/* eslint-disable @typescript-eslint/no-explicit-any */

const provisioned = provisionHelm();
if (provisioned.skip) process.stderr.write(`helm-model-files SKIPPED: ${provisioned.skip}\n`);
const describeHelm = provisioned.helm ? describe : describe.skip;

const PVC = ['--set', 'modelVolume.volume.persistentVolumeClaim.claimName=qwen3-32b', '--set', 'model=Qwen/Qwen3-32B'];
const MEMORY = ['--set', 'resources.sidecar.limits.memory=1Gi'];

describeHelm('the chat template and the tokenizer from the chart', () => {
  const helm = provisioned.helm!;

  async function render(args: string[]) {
    const r = await run(helm, ['template', 'gw', CHART, '-n', 'inference', ...args]);
    if (r.code !== 0) throw new Error(`helm template ${args.join(' ')} (exit ${r.code}):\n${r.out}`);
    return docsOfYaml(r.stdout);
  }
  /** The sidecar container (a native sidecar in kubernetes mode, a container in istio mode) and the pod's volumes. */
  async function sidecar(args: string[]) {
    const pod = (await render(args)).find((d) => d.kind === 'Deployment').spec.template.spec;
    const c = [...(pod.initContainers ?? []), ...pod.containers].find((x: any) => x.name === 'continuation-sidecar');
    const env = Object.fromEntries(c.env.map((e: any) => [e.name, e.value]));
    const others = pod.containers.filter((x: any) => x.name !== 'continuation-sidecar');
    return { env, mounts: c.volumeMounts, volumes: pod.volumes, others };
  }
  const refused = async (args: string[]) => {
    const r = await run(helm, ['template', 'gw', CHART, ...args]);
    return [r.code, r.out];
  };

  const modes: [string, string[]][] = [
    ['kubernetes', []],
    ['istio', ['--set', 'mode=istio']],
  ];

  test.each(modes)('%s mode: a ConfigMap-held template mounts as a file and sets CHAT_TEMPLATE to it', async (_m, mode) => {
    const s = await sidecar([...mode, '--set', 'model=moonshotai/Kimi-K3', '--set', 'chatTemplate.configMap.name=kimi-template']);
    expect(s.env.CHAT_TEMPLATE).toBe('/etc/continuation-gateway/chat-template/chat_template.jinja');
    expect(s.env.TOKENIZER).toBeUndefined();
    expect(s.mounts).toEqual([{ name: 'chat-template', mountPath: '/etc/continuation-gateway/chat-template', readOnly: true }]);
    expect(s.volumes).toContainEqual({ name: 'chat-template', configMap: { name: 'kimi-template' } });
    // Only the sidecar reads it: Envoy (kubernetes mode) mounts its own configuration alone.
    for (const c of s.others) expect(c.volumeMounts ?? []).not.toContainEqual(expect.objectContaining({ name: 'chat-template' }));
    const key = await sidecar([
      ...mode,
      '--set',
      'model=m',
      '--set',
      'chatTemplate.configMap.name=t',
      '--set',
      'chatTemplate.configMap.key=tokenizer_config.json',
    ]);
    expect(key.env.CHAT_TEMPLATE).toBe('/etc/continuation-gateway/chat-template/tokenizer_config.json');
  });

  test.each(modes)('%s mode: the model volume, read-only, holds the template and the tokenizer', async (_m, mode) => {
    const s = await sidecar([
      ...mode,
      ...PVC,
      ...MEMORY,
      '--set',
      'chatTemplate.path=Qwen3-32B',
      '--set',
      'tokenizer.path=Qwen3-32B/tokenizer.json',
    ]);
    expect([s.env.CHAT_TEMPLATE, s.env.TOKENIZER]).toEqual(['/models/Qwen3-32B', '/models/Qwen3-32B/tokenizer.json']);
    expect(s.mounts).toEqual([{ name: 'model', mountPath: '/models', readOnly: true }]);
    expect(s.volumes).toContainEqual({ name: 'model', persistentVolumeClaim: { claimName: 'qwen3-32b' } });
    // An absolute path under the mount, another mount point, a subPath of the volume.
    const abs = await sidecar([
      ...mode,
      ...PVC,
      ...[
        '--set',
        'modelVolume.mountPath=/mnt/weights',
        '--set',
        'modelVolume.subPath=qwen3',
        '--set',
        'chatTemplate.path=/mnt/weights/chat_template.jinja',
      ],
    ]);
    expect([abs.env.CHAT_TEMPLATE, abs.env.TOKENIZER]).toEqual(['/mnt/weights/chat_template.jinja', undefined]);
    expect(abs.mounts).toEqual([{ name: 'model', mountPath: '/mnt/weights', subPath: 'qwen3', readOnly: true }]);
  });

  test('both mounts at once; a hostPath, CSI or image volume is passed on as it is; nothing without a setting', async () => {
    const both = await sidecar([
      ...['--set', 'model=m', '--set', 'chatTemplate.configMap.name=t', '--set', 'tokenizer.path=m'],
      ...['--set-json', 'modelVolume.volume={"hostPath":{"path":"/var/models","type":"Directory"}}', ...MEMORY],
    ]);
    expect(both.mounts.map((m: any) => [m.name, m.readOnly])).toEqual([
      ['chat-template', true],
      ['model', true],
    ]);
    expect(both.volumes.map((v: any) => v.name)).toEqual(['envoy-config', 'chat-template', 'model']);
    expect(both.volumes[2]).toEqual({ name: 'model', hostPath: { path: '/var/models', type: 'Directory' } });
    for (const v of [
      { csi: { driver: 's3.csi.aws.com', readOnly: true, volumeAttributes: { bucketName: 'models' } } },
      { image: { reference: 'registry.example.com/models/qwen3-32b:1', pullPolicy: 'IfNotPresent' } },
    ])
      expect((await sidecar(['--set-json', `modelVolume.volume=${JSON.stringify(v)}`])).volumes).toContainEqual({ name: 'model', ...v });
    for (const [, mode] of modes) {
      const none = await sidecar(mode);
      expect([none.env.CHAT_TEMPLATE, none.env.TOKENIZER, none.mounts]).toEqual([undefined, undefined, undefined]);
      expect((none.volumes ?? []).map((v: any) => v.name)).toEqual(mode.length ? [] : ['envoy-config']);
    }
  });

  test.each(modes)('%s mode: the forms pass kubernetes-validate --strict at 1.37', async (_m, mode) => {
    const forms = [
      ['--set', 'chatTemplate.configMap.name=t', '--set-json', 'modelVolume.volume={"image":{"reference":"registry.example.com/m:1"}}'],
      [
        '--set',
        'chatTemplate.path=m',
        '--set',
        'modelVolume.subPath=m',
        '--set-json',
        'modelVolume.volume={"csi":{"driver":"d","readOnly":true}}',
      ],
    ];
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'helm-model-files-'));
    try {
      for (const [i, form] of forms.entries()) {
        const r = await run(helm, ['template', 'gw', CHART, '-s', 'templates/deployment.yaml', '--set', 'model=m', ...mode, ...form]);
        const file = path.join(dir, `${i}.yaml`);
        fs.writeFileSync(file, r.stdout);
        const v = await run(venvTool('kubernetes-validate'), ['--strict', '-k', '1.37.0', file]);
        expect([form, v.code, v.out]).toEqual([form, 0, expect.stringContaining('passed for resource')]);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('auto: vLLM and llama.cpp, never SGLang; a path the image holds needs no volume', async () => {
    for (const engine of ['vllm', 'llamacpp']) {
      const s = await sidecar(['--set', 'model=m', '--set', `engine=${engine}`, '--set', 'chatTemplate.auto=true']);
      expect([s.env.CHAT_TEMPLATE, s.mounts]).toEqual(['auto', undefined]);
    }
    expect(await refused(['--set', 'model=m', '--set', 'chatTemplate.auto=true'])).toEqual([
      1,
      expect.stringContaining('chatTemplate.auto: SGLang cannot tell its template'),
    ]);
    const image = await sidecar([
      ...['--set', 'model=m', '--set', 'chatTemplate.path=/opt/templates/qwen3.jinja', '--set', 'chatTemplate.inImage=true'],
      ...['--set', 'tokenizer.path=/opt/qwen3', '--set', 'tokenizer.inImage=true', ...MEMORY],
    ]);
    expect([image.env.CHAT_TEMPLATE, image.env.TOKENIZER, image.mounts]).toEqual(['/opt/templates/qwen3.jinja', '/opt/qwen3', undefined]);
  });

  test("the sidecar's own configuration accepts what the chart renders (a real model directory as the volume)", async () => {
    const assets = execFileSync('bash', [path.join(ROOT, 'scripts', 'tokenizer-assets.sh')], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .pop()!;
    const s = await sidecar([
      ...PVC,
      ...MEMORY,
      '--set',
      `modelVolume.mountPath=${assets}`,
      '--set',
      'chatTemplate.path=qwen3',
      '--set',
      'tokenizer.path=qwen3',
    ]);
    const cfg = loadConfig(s.env);
    expect([cfg.chatTemplate, cfg.tokenizer]).toEqual([path.join(assets, 'qwen3'), path.join(assets, 'qwen3')]);
  });

  const contradictions: [string, string[], string][] = [
    [
      'auto and a path',
      ['--set', 'chatTemplate.auto=true', '--set', 'chatTemplate.path=x', ...PVC],
      'chatTemplate: set one of auto, configMap.name or path, not auto and path',
    ],
    [
      'a ConfigMap and a path',
      ['--set', 'chatTemplate.configMap.name=t', '--set', 'chatTemplate.path=x', ...PVC],
      'not configMap and path',
    ],
    ['a template without a model', ['--set', 'chatTemplate.configMap.name=t'], 'chatTemplate needs model'],
    [
      'a path without a volume',
      ['--set', 'model=m', '--set', 'chatTemplate.path=Qwen3-32B'],
      'chatTemplate.path Qwen3-32B needs modelVolume.volume',
    ],
    [
      'an absolute path without a volume',
      ['--set', 'model=m', '--set', 'chatTemplate.path=/models/Q'],
      'or chatTemplate.inImage: true for an absolute path in the image',
    ],
    [
      'a path outside the mount',
      [...PVC, '--set', 'chatTemplate.path=/data/Q'],
      'chatTemplate.path /data/Q is outside modelVolume.mountPath /models',
    ],
    [
      'inImage with a relative path',
      ['--set', 'model=m', '--set', 'chatTemplate.path=Q', '--set', 'chatTemplate.inImage=true'],
      'chatTemplate.inImage needs an absolute chatTemplate.path',
    ],
    ['inImage with no path', ['--set', 'tokenizer.inImage=true'], 'tokenizer.inImage needs an absolute tokenizer.path'],
    ['a tokenizer without a volume', ['--set', 'tokenizer.path=Q', ...MEMORY], 'tokenizer.path Q needs modelVolume.volume'],
  ];
  test.each(contradictions)('refused: %s', async (_n, args, message) => {
    expect(await refused(args)).toEqual([1, expect.stringContaining(message)]);
  });

  test('the tokenizer in every worker needs memory: 128 MiB a process and 256 MiB a worker, in any unit', async () => {
    const tok = [...PVC, '--set', 'tokenizer.path=Qwen3-32B'];
    expect(await refused(tok)).toEqual([
      1,
      expect.stringContaining('resources.sidecar.limits.memory 512Mi is below 896Mi with tokenizer.path'),
    ]);
    expect(await refused([...tok, '--set', 'resources.sidecar.limits.memory=895Mi'])).toEqual([1, expect.stringContaining('below 896Mi')]);
    expect(await refused([...tok, '--set', 'workers=1', '--set', 'resources.sidecar.limits.memory=511Mi'])).toEqual([
      1,
      expect.stringContaining('below 512Mi'),
    ]);
    for (const q of ['896Mi', '1Gi', '0.875Gi', '939524096', '940M', '917504Ki'])
      expect([
        q,
        (await run(helm, ['template', 'gw', CHART, ...tok, '--set-string', `resources.sidecar.limits.memory=${q}`])).code,
      ]).toEqual([q, 0]);
    // The limit as a number of bytes (a YAML integer): 896 MiB exactly passes, a byte less does not.
    expect((await run(helm, ['template', 'gw', CHART, ...tok, '--set', 'resources.sidecar.limits.memory=939524096'])).code).toBe(0);
    expect(await refused([...tok, '--set', 'resources.sidecar.limits.memory=939524095'])).toEqual([
      1,
      expect.stringContaining('below 896Mi'),
    ]);
    expect(await refused([...tok, '--set', 'resources.sidecar.limits.memory=1GB'])).toEqual([
      1,
      expect.stringContaining('memory quantity "1GB"'),
    ]);
    expect(await refused([...tok, ...MEMORY, '--set', 'workers=0'])).toEqual([
      1,
      expect.stringContaining('tokenizer.path with workers 0 (auto)'),
    ]);
  });

  const typos: string[][] = [
    ['chatTemplate.confgMap.name=t', "at '/chatTemplate': additional properties 'confgMap' not allowed"],
    ['chatTemplate.configMap.nmae=t', "at '/chatTemplate/configMap': additional properties 'nmae' not allowed"],
    ['chatTemplate.auto=yes', "at '/chatTemplate/auto': got string, want boolean"],
    ['tokenizer.pth=x', "at '/tokenizer': additional properties 'pth' not allowed"],
    [
      'modelVolume.volume.persistentVolumeClam.claimName=x',
      "at '/modelVolume/volume': additional properties 'persistentVolumeClam' not allowed",
    ],
    ['modelVolume.volume.name=x', "at '/modelVolume/volume': additional properties 'name' not allowed"],
    ['modelVolume.mountPath=models', "at '/modelVolume/mountPath'"],
  ];
  test.each(typos)('helm lint --strict and helm template refuse --set %s', async (value, message) => {
    for (const cmd of [
      ['template', 'gw'],
      ['lint', '--strict'],
    ]) {
      const r = await run(helm, [...cmd, CHART, '--set', value]);
      expect([cmd[0], r.code, r.out]).toEqual([cmd[0], 1, expect.stringContaining(message)]);
    }
  });

  test('a volume has one source', async () => {
    const two = await run(helm, [
      'template',
      'gw',
      CHART,
      '--set-json',
      'modelVolume.volume={"hostPath":{"path":"/m"},"nfs":{"server":"s","path":"/m"}}',
    ]);
    expect([two.code, two.out]).toEqual([1, expect.stringContaining("at '/modelVolume/volume': maxProperties: got 2, want 1")]);
  });
});
