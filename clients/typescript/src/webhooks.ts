/**
 * Verify a request keyfire's `http` handler sent, with the Standard Webhooks library.
 *
 * keyfire signs every delivery (and callback) by the Standard Webhooks spec; the verification
 * here is the spec's own library (`standardwebhooks` on npm), given the raw body and headers.
 * It refuses a body changed by one byte, a missing or wrong signature, and a timestamp more
 * than five minutes from this machine's clock (a replay).
 */

import { Webhook, WebhookVerificationError } from "standardwebhooks";

export { WebhookVerificationError };

/** Headers as Node's `IncomingMessage.headers`, a fetch `Headers`, or a plain object. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

/**
 * A verified request. `id` is the firing id (`<job id>:<instant ms>`), the same on every
 * attempt: do the work once per id. Callbacks carry `<firing id>:succeeded` or `:failed`.
 */
export interface Delivery {
  id: string;
  timestamp: number;
  /** The raw body, as verified. */
  body: string;
  jobId: string | null;
  attempt: number | null;
  scheduledAt: string | null;
  /** The body parsed as JSON. */
  json<T = unknown>(): T;
}

function plain(headers: WebhookHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof (headers as Headers).forEach === "function" && typeof (headers as Headers).get === "function") {
    (headers as Headers).forEach((value, key) => {
      out[key.toLowerCase()] = value;
    });
    return out;
  }
  for (const [key, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (value !== undefined) out[key.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}

/**
 * Verifies requests under one secret, or under any of several while rotating one:
 *
 *     const verifier = new WebhookVerifier("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
 *     const delivery = verifier.verify(rawBody, req.headers); // throws WebhookVerificationError
 */
export class WebhookVerifier {
  readonly #hooks: Webhook[];

  constructor(...secrets: string[]) {
    if (secrets.length === 0) throw new RangeError("give at least one whsec_ secret");
    this.#hooks = secrets.map((s) => new Webhook(s));
  }

  /** Check `body` (the raw bytes or string, before any JSON parsing) against `headers`. */
  verify(body: string | Uint8Array, headers: WebhookHeaders): Delivery {
    const raw = typeof body === "string" ? body : Buffer.from(body).toString("utf8");
    const h = plain(headers);
    let error: unknown;
    let verified = false;
    for (const hook of this.#hooks) {
      try {
        hook.verify(raw, h, { jsonParse: false });
        verified = true;
        break;
      } catch (err) {
        error = err;
      }
    }
    if (!verified) throw error;
    const attempt = h["keyfire-attempt"];
    return {
      id: h["webhook-id"]!,
      timestamp: Number(h["webhook-timestamp"]),
      body: raw,
      jobId: h["keyfire-job-id"] ?? null,
      attempt: attempt !== undefined && /^\d+$/.test(attempt) ? Number(attempt) : null,
      scheduledAt: h["keyfire-scheduled-at"] ?? null,
      json<T>() {
        return JSON.parse(raw) as T;
      },
    };
  }
}
