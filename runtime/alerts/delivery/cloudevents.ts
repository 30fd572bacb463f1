/**
 * CloudEvents 1.0, structured content mode (JSON event format): the whole event, with the
 * alert as `data`, is the body, sent as `application/cloudevents+json`. The event id is the
 * alert id, so CloudEvents receivers deduplicate on (source, id) as the spec intends.
 */
import { ALERT_SCHEMA_ID, type Alert } from "../../../api/alert.ts";

export const CLOUDEVENTS_CONTENT_TYPE = "application/cloudevents+json; charset=utf-8";
export const CLOUDEVENT_TYPE = "com.hive-operator.alert.v1";

export interface CloudEvent {
  specversion: "1.0";
  id: string;
  source: string;
  type: string;
  time: string;
  subject: string;
  datacontenttype: "application/json";
  dataschema: string;
  data: Alert;
}

/** `source` names the reporting agent: /hive-operator.com/nodes/<node>. */
export function toCloudEvent(alert: Alert): CloudEvent {
  return {
    specversion: "1.0",
    id: alert.id,
    source: `/hive-operator.com/nodes/${encodeURIComponent(alert.node.name)}`,
    type: CLOUDEVENT_TYPE,
    time: alert.timestamp,
    subject: alert.metadata.path,
    datacontenttype: "application/json",
    dataschema: ALERT_SCHEMA_ID,
    data: alert,
  };
}

/** Wraps an already-serialised alert; `data` keeps the alert's exact bytes. */
export function cloudEventBody(alertJson: string): string {
  const { data: _data, ...head } = toCloudEvent(JSON.parse(alertJson) as Alert);
  const json = JSON.stringify(head);
  return `${json.slice(0, -1)},"data":${alertJson}}`;
}
