/**
 * Whether the CLI's VM tests can run here. Locally they skip with a loud reason; under
 * CI=true a missing prerequisite is a failure, never a silent pass.
 */
import { findKernels, type KernelImage, vmUnavailable } from "../kernel/vm.ts";

export function cliVmKernel(): KernelImage | undefined {
  const why = vmUnavailable();
  const kernel = findKernels().found.find((k) => k.series === "6.1") ?? findKernels().found[0];
  const reason = why ?? (kernel ? null : "no stock kernel found (apt-get install linux-image-amd64)");
  if (reason === null) return kernel;
  const message = `CLI VM TESTS NOT RUN: ${reason}`;
  if (process.env.CI === "true") throw new Error(`${message} (CI=true requires them)`);
  console.warn(`\n*** ${message} ***\n`);
  return undefined;
}
