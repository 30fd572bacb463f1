// The components the plugin serves; their arguments are reshaped for the package schema in
// the package's component/plugin.ts.
export { HiveMonitor, HivePolicy } from "@hive-operator/hive/plugin";
