/**
 * A Slack-compatible incoming-webhook message: the body of callback format `slack`. `text` is
 * the whole message (what Mattermost, Rocket.Chat and other Slack-compatible hooks show, and
 * Slack's notification text); `blocks` lay it out in Slack (a section and a context line).
 *
 * Slack reads `<…>` as links and mentions (`<!channel>` notifies everyone) and `&` as the start
 * of an escape: text from the container (path, executable, comm) could ping a channel or forge a
 * link. So every value is escaped as Slack asks (`&amp;` `&lt;` `&gt;`) and shown in a code
 * span (no bold, italics or strike from `*_~` inside it), with backticks replaced.
 */
import type { Alert } from "../../../api/alert.ts";
import { summaryParts } from "../alert-summary.ts";

/** Slack cuts a section's or a context element's text beyond 3,000 characters (and refuses the message). */
export const SLACK_TEXT_MAX = 3000;

export interface SlackText {
  type: "mrkdwn";
  text: string;
}
export type SlackBlock = { type: "section"; text: SlackText } | { type: "context"; elements: SlackText[] };
export interface SlackMessage {
  text: string;
  blocks: SlackBlock[];
}

/** Escaped for Slack and bounded (whole escapes only: a cut never leaves `&am`). */
export function slackEscape(text: string, max = 512): string {
  let out = "";
  for (const ch of text) {
    const piece = ch === "&" ? "&amp;" : ch === "<" ? "&lt;" : ch === ">" ? "&gt;" : ch === "`" ? "'" : ch;
    if (out.length + piece.length > max) return `${out}…`;
    out += piece;
  }
  return out;
}

const code = (text: string, max?: number) => `\`${slackEscape(text, max)}\``;

function bounded(text: string): string {
  return text.length <= SLACK_TEXT_MAX ? text : `${text.slice(0, SLACK_TEXT_MAX - 1)}…`;
}

export function toSlackMessage(alert: Alert): SlackMessage {
  const p = summaryParts(alert);
  const container = p.container ? `, container ${code(p.container)}` : "";
  const headline =
    `*Hive* [${alert.severity}] ${slackEscape(p.accesses)} of ${code(p.path)} by ${code(p.process)}` +
    ` (pid ${p.pid}, uid ${p.uid}) in ${code(p.where)}${container}`;
  const facts = [
    ...(alert.cluster ? [`cluster ${code(alert.cluster.name)}`] : []),
    `node ${code(alert.node.name)}`,
    ...(p.workload ? [`workload ${code(p.workload)}`] : []),
    ...(p.image ? [`image ${code(p.image)}`] : []),
    `policy ${code(`${alert.hive_policy_namespace ? `${alert.hive_policy_namespace}/` : ""}${alert.hive_policy_name}`)}`,
    `trap ${code(alert.trap_id)}`,
    ...Object.entries(alert.labels ?? {}).map(([k, v]) => `${slackEscape(k)}=${code(v)}`),
    `alert ${code(alert.id)}`,
  ].join(" · ");
  return {
    text: bounded(`${headline}\n${facts}`),
    blocks: [
      { type: "section", text: { type: "mrkdwn", text: bounded(headline) } },
      { type: "context", elements: [{ type: "mrkdwn", text: bounded(facts) }] },
    ],
  };
}

export function slackBody(alertJson: string): string {
  return JSON.stringify(toSlackMessage(JSON.parse(alertJson) as Alert));
}
