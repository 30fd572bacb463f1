// The components the plugin serves, from the compiled package this directory sits in: the
// package root is `..` both in a clone (after `npm run build`) and in an installed
// @hive-operator/hive (node_modules/@hive-operator/hive/plugin). CommonJS, as the Pulumi host
// `require`s the plugin; the package is ESM, which require() loads from Node 22.12 on.
// The same exports as index.ts (a test checks).
const { HiveMonitor, HivePolicy } = require("../dist/component/plugin.js");

module.exports = { HiveMonitor, HivePolicy };
