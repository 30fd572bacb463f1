/**
 * A receiver that refuses a body it cannot read (a Slack webhook answers 400 `invalid_payload`
 * to Hive's JSON) will refuse every alert the same way: retrying cannot help, another body
 * format can. This tells such answers apart from other refusals and says which option fixes
 * them, for the error the dispatcher logs when it drops the alert.
 */
import { CALLBACK_FORMATS, type CallbackFormat } from "../../../api/alert.ts";
import { ALERTMANAGER_ALERTS_PATH } from "./alertmanager.ts";

/** Statuses a receiver answers to a body it does not understand: bad request, unsupported media type, unprocessable. */
const BODY_REFUSED = new Set([400, 415, 422]);

/** The format a receiver seems to want, from its URL and answer; undefined when nothing tells. */
export function likelyFormat(url: string, answer: string | undefined): CallbackFormat | undefined {
  let u: URL | undefined;
  try {
    u = new URL(url);
  } catch {
    u = undefined;
  }
  const text = (answer ?? "").toLowerCase();
  if (
    u?.hostname === "hooks.slack.com" ||
    /\b(invalid_payload|no_text|missing_text_or_fallback_or_attachments)\b/.test(text)
  )
    return "slack";
  if (u?.pathname.endsWith(ALERTMANAGER_ALERTS_PATH) || text.includes("postablealert")) return "alertmanager";
  if (text.includes("cloudevent")) return "cloudevents";
  return undefined;
}

/**
 * The hint for a refusal that a format change may fix, or undefined when the status says
 * something else (a 4xx such as 410 Gone or 413 Payload Too Large).
 */
export function formatHint(
  url: string,
  status: number | undefined,
  answer: string | undefined,
  sent: CallbackFormat,
): string | undefined {
  if (status === undefined || !BODY_REFUSED.has(status)) return undefined;
  const likely = likelyFormat(url, answer);
  const others = CALLBACK_FORMATS.filter((f) => f !== sent).join(", ");
  const suggestion =
    likely !== undefined && likely !== sent
      ? `this receiver looks like it wants callback.format "${likely}"`
      : `if it expects another body, set callback.format to one of ${others}`;
  return (
    `the receiver refused the ${sent} body; ${suggestion} ` +
    "(the monitor's callback option; it applies to the URLs under the callback's origin)"
  );
}
