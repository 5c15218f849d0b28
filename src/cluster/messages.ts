// What the cluster's primary and its workers say to each other over Node's IPC channel.
import type { Registry } from 'prom-client';
import type { AdmissionRequestMessage, AdmissionToWorker } from '../recovery/admission-cluster';

/** prom-client's JSON form of a registry, as getMetricsAsJSON() returns it and aggregate() takes it. */
export type MetricJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>[number];

/** Worker -> primary: listening, an answer to `metrics?`, or a recovery admission request. */
export type ToPrimary = { type: 'ready'; port: number } | { type: 'metrics'; id: number; json: MetricJson[] } | AdmissionRequestMessage;

/**
 * Primary -> worker: a metrics request, recovery admission's answer or quiet state, or a stop (workers ignore
 * signals: a signal sent to the whole process group would otherwise reach them twice, from it and from us).
 */
export type ToWorker = { type: 'metrics?'; id: number } | { type: 'stop'; level: 'draining' | 'stopping-now' } | AdmissionToWorker;
