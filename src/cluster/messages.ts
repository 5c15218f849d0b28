// What the cluster's primary and its workers say to each other over Node's IPC channel.
import type { Registry } from 'prom-client';
import type { AdmissionRequestMessage, AdmissionToWorker } from '../recovery/admission-cluster';

/** prom-client's JSON form of a registry, as getMetricsAsJSON() returns it and aggregate() takes it. */
export type MetricJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>[number];

/** Worker -> primary: listening, an answer to `metrics?`, or a recovery admission request. */
export type ToPrimary = { type: 'ready'; port: number } | { type: 'metrics'; id: number; json: MetricJson[] } | AdmissionRequestMessage;

/** Primary -> worker: a metrics request, or recovery admission's answer or quiet state. */
export type ToWorker = { type: 'metrics?'; id: number } | AdmissionToWorker;
