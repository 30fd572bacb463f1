/**
 * Kubernetes names as schema patterns: label keys and values, namespace names (DNS labels) and
 * object names (DNS subdomains). The trap selector and the trap labels both check against them.
 */

/** Kubernetes label keys and values, and namespace names (DNS labels), as schema patterns. */
export const LABEL_KEY_PATTERN =
  "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";
export const LABEL_VALUE_PATTERN = "^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$";
export const DNS_LABEL_PATTERN = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$";
/** A pod's name. Not re-exported by api/policy.ts: only the selector uses it. */
export const DNS_SUBDOMAIN_PATTERN = "^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$";
