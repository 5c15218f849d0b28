// Loads our wire-compatible subset of envoy.service.ext_proc.v3 (see proto/README.md) and types the parts
// we touch. Field names stay snake_case (keepCase) so they read like Envoy's docs.
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { EncodedResponse } from './encode-body';

export interface HeaderValue {
  key: string;
  value?: string;
  raw_value?: Buffer;
}
export interface HeaderMap {
  headers: HeaderValue[];
}

export interface ProcessingRequest {
  request?: 'request_headers' | 'request_body' | 'request_trailers' | 'response_headers' | 'response_body' | 'response_trailers';
  request_headers?: { headers?: HeaderMap; end_of_stream: boolean };
  request_body?: { body: Buffer; end_of_stream: boolean };
  request_trailers?: { trailers?: HeaderMap };
  protocol_config?: { request_body_mode: string; response_body_mode: string };
}

export interface HeaderValueOption {
  header: { key: string; raw_value: Buffer };
  append_action?: 'APPEND_IF_EXISTS_OR_ADD' | 'ADD_IF_ABSENT' | 'OVERWRITE_IF_EXISTS_OR_ADD' | 'OVERWRITE_IF_EXISTS';
}

export type ProcessingResponse =
  | { request_headers: { response: { status?: 'CONTINUE' | 'CONTINUE_AND_REPLACE' } } }
  | { request_body: { response: { body_mutation: { streamed_response: { body: Buffer; end_of_stream: boolean } } } } }
  | { request_trailers: Record<string, never> }
  | {
      streamed_immediate_response:
        | { headers_response: { headers: { headers: Array<{ key: string; raw_value: Buffer }> }; end_of_stream?: boolean } }
        | { body_response: { body: Buffer; end_of_stream: boolean } };
    }
  | { immediate_response: { status: { code: number }; headers?: { set_headers: HeaderValueOption[] }; body?: Buffer; details?: string } };

const PROTO_ROOT = path.resolve(__dirname, '../../../proto');

let cached: grpc.ServiceDefinition | undefined;

export function extProcServiceDefinition(): grpc.ServiceDefinition {
  if (cached) return cached;
  const def = protoLoader.loadSync('envoy/service/ext_proc/v3/external_processor.proto', {
    includeDirs: [PROTO_ROOT],
    keepCase: true,
    longs: String,
    enums: String,
    // defaults: true matters: Envoy ends the request body with an empty chunk whose `body` field is absent
    // on the wire (docs/envoy.md (a)).
    defaults: true,
    oneofs: true,
  });
  // The package tree proto-loader builds has no static type: walk it to the one service we serve.
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    envoy: { service: { ext_proc: { v3: { ExternalProcessor: { service: grpc.ServiceDefinition } } } } };
  };
  const service = { ...pkg.envoy.service.ext_proc.v3.ExternalProcessor.service };
  const process = service.Process;
  const serialize = process.responseSerialize;
  // Body chunks arrive pre-encoded (encode-body.ts); everything else goes through proto-loader.
  service.Process = { ...process, responseSerialize: (v: unknown) => (v instanceof EncodedResponse ? v.bytes : serialize(v)) };
  cached = service;
  return cached;
}

/** Lower-cased header name -> value (first wins for duplicates, except set-cookie which is not expected). */
export function headerMapToRecord(map: HeaderMap | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of map?.headers ?? []) {
    const key = h.key.toLowerCase();
    const value = h.raw_value?.length ? h.raw_value.toString('latin1') : (h.value ?? '');
    if (!(key in out)) out[key] = value;
  }
  return out;
}
