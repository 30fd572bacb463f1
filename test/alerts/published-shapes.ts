/**
 * The published shapes of the bodies Hive sends in its other callback formats, written down
 * from their specifications (not from Hive's code) as TypeBox schemas, and a validator for them:
 *
 * - CloudEvents 1.0 (github.com/cloudevents/spec, spec.md and formats/json-format.md): the
 *   required context attributes `id`, `source` (URI-reference), `specversion` "1.0", `type`
 *   (non-empty strings); the optional `datacontenttype` (RFC 2046), `dataschema` (URI),
 *   `subject`, `time` (RFC 3339); attribute names of lower-case letters and digits.
 * - Slack incoming webhooks and Block Kit (api.slack.com/messaging/webhooks, /reference/block-kit):
 *   `text` a string; `blocks` at most 50, each a section (a text object of 1–3,000 characters
 *   and/or up to 10 fields of at most 2,000), a context (1–10 elements), a divider or a header
 *   (plain text, at most 150); a text object is `plain_text` or `mrkdwn`.
 * - Alertmanager's v2 API (api/v2/openapi.yaml, `postableAlerts`): an array of alerts with a
 *   `labels` map (required) and `annotations` map of strings, `startsAt`/`endsAt` date-times and a
 *   `generatorURL` URI; label names as Prometheus allows them.
 */
import { type TSchema, Type } from "@sinclair/typebox";
import { Ajv } from "ajv";
import { FORMATS } from "../../api/formats.ts";

const isUri = (s: string) => {
  try {
    new URL(s);
    return true;
  } catch {
    return false;
  }
};
const isUriReference = (s: string) => {
  try {
    new URL(s, "http://base.invalid/");
    return s.length > 0;
  } catch {
    return false;
  }
};

export const CloudEventSchema = Type.Object(
  {
    specversion: Type.Literal("1.0"),
    id: Type.String({ minLength: 1 }),
    source: Type.String({ minLength: 1, format: "uri-reference" }),
    type: Type.String({ minLength: 1 }),
    datacontenttype: Type.Optional(Type.String({ pattern: "^[a-zA-Z0-9!#$&^_.+-]+/[a-zA-Z0-9!#$&^_.+-]+" })),
    dataschema: Type.Optional(Type.String({ minLength: 1, format: "uri" })),
    subject: Type.Optional(Type.String({ minLength: 1 })),
    time: Type.Optional(Type.String({ format: "date-time" })),
    data: Type.Optional(Type.Unknown()),
    data_base64: Type.Optional(Type.String()),
  },
  // Extension attributes are allowed; every attribute name is lower-case letters and digits.
  { propertyNames: { pattern: "^([a-z0-9]+|data_base64)$" } },
);

const SlackTextSchema = Type.Object({
  type: Type.Union([Type.Literal("plain_text"), Type.Literal("mrkdwn")]),
  text: Type.String({ minLength: 1, maxLength: 3000 }),
  emoji: Type.Optional(Type.Boolean()),
  verbatim: Type.Optional(Type.Boolean()),
});
const SlackImageSchema = Type.Object({
  type: Type.Literal("image"),
  image_url: Type.String({ format: "uri" }),
  alt_text: Type.String(),
});
const blockId = Type.Optional(Type.String({ maxLength: 255 }));
export const SlackBlockSchema = Type.Union([
  Type.Object({
    type: Type.Literal("section"),
    text: Type.Optional(SlackTextSchema),
    fields: Type.Optional(
      Type.Array(
        Type.Object({ type: SlackTextSchema.properties.type, text: Type.String({ maxLength: 2000 }) }),
        {
          maxItems: 10,
        },
      ),
    ),
    block_id: blockId,
  }),
  Type.Object({
    type: Type.Literal("context"),
    elements: Type.Array(Type.Union([SlackTextSchema, SlackImageSchema]), { minItems: 1, maxItems: 10 }),
    block_id: blockId,
  }),
  Type.Object({ type: Type.Literal("divider"), block_id: blockId }),
  Type.Object({
    type: Type.Literal("header"),
    text: Type.Object({
      type: Type.Literal("plain_text"),
      text: Type.String({ minLength: 1, maxLength: 150 }),
    }),
    block_id: blockId,
  }),
]);
export const SlackMessageSchema = Type.Object({
  text: Type.String({ minLength: 1 }),
  blocks: Type.Optional(Type.Array(SlackBlockSchema, { maxItems: 50 })),
});

export const PostableAlertsSchema = Type.Array(
  Type.Object({
    labels: Type.Record(Type.String(), Type.String(), {
      propertyNames: { pattern: "^[a-zA-Z_][a-zA-Z0-9_]*$" },
      minProperties: 1,
    }),
    annotations: Type.Optional(Type.Record(Type.String(), Type.String())),
    startsAt: Type.Optional(Type.String({ format: "date-time" })),
    endsAt: Type.Optional(Type.String({ format: "date-time" })),
    generatorURL: Type.Optional(Type.String({ format: "uri" })),
  }),
);

const ajv = new Ajv({ allErrors: true, strict: false });
for (const [name, check] of Object.entries(FORMATS)) ajv.addFormat(name, check);
ajv.addFormat("uri", isUri);
ajv.addFormat("uri-reference", isUriReference);

/** Throws with the validator's messages when `value` does not have the published shape. */
export function assertShape(schema: TSchema, value: unknown, what: string): void {
  const validate = ajv.compile(schema);
  if (!validate(value))
    throw new Error(
      `${what} does not match its published shape: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value)}`,
    );
}
