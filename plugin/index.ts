// The declarations Pulumi's component provider reads the package schema from (the host runs
// index.js); their arguments are reshaped for the schema in the package's component/plugin.ts.
export { HiveMonitor, HivePolicy } from "../dist/component/plugin.js";
