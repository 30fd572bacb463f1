/** The API server stand-in for tests (see server.ts for what it implements). */

export { type ListSource, listSource } from "./list-source.ts";
export {
  type ApiServer,
  type FaultRule,
  type RequestFilter,
  type RequestRecord,
  type StartOptions,
  startApiServer,
  type Verb,
} from "./server.ts";
export { podBody, rejection, seedNode, setPodRunning, statusOf, waitFor } from "./testing.ts";
