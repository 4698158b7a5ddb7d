/**
 * Notifications of new pending items (CONTRACT "Notifications"): every new item that waits for a
 * human (a change of any kind, a held transaction) is announced to the webhook endpoints the
 * operator configured (SVC_NOTIFY_WEBHOOK_URLS).
 *
 * The outbox pattern: whoever creates a pending item asks the `PendingItemNotifier` for its notices
 * and hands them to its store, which writes them in the SAME commit as the item. So a notice exists
 * if and only if its item does: nothing is lost when the process stops right after the commit, and
 * nothing is announced that was not stored. A background worker (`NoticeDelivery`) delivers them
 * later, never on the request's path: a notification never delays or fails a request.
 */
import type { IdGenerator } from '../ports/clock.js';

/** A new item waiting for a human. */
export interface PendingItem {
  /** `policy`, `external-connector`, `business-signal-source`, `authority-grant`, … */
  kind: string;
  /** The item's id (a change's id; a held transaction's businessTransactionId). */
  id: string;
  /** One line saying what it is about, for a person. */
  summary: string;
  /** When it was created (ISO 8601). */
  createdAt: string;
}

/** One delivery of one announcement to one endpoint: a row of the outbox. */
export interface OutboundNotice {
  /** Unique per endpoint and announcement. */
  deliveryId: string;
  /** `webhook-id`: one per announcement, the same for every endpoint and every retry (receivers dedupe by it). */
  messageId: string;
  endpoint: string;
  /** The JSON payload, sent (and signed) as `jsonBodyText(body)`. */
  body: unknown;
  createdAt: string;
}

/** The payload of a notification (CONTRACT "Notifications"). */
export interface PendingCreatedEvent {
  type: 'pending.created';
  item: { kind: string; id: string; summary: string; consoleUrl: string };
  createdAt: string;
}

/**
 * What the creators of pending items call (the maker-checker propose path, held transactions):
 * `noticesOf(item)` gives the notices to store in the item's own commit, none when nobody is to be
 * told. Creating an item announces it with one line:
 * `store.create(item, …, notifier.noticesOf({ kind, id, summary, createdAt }))`.
 */
export interface PendingItemNotifier {
  noticesOf(item: PendingItem): OutboundNotice[];
}

/** No endpoint configured: nothing is written, nothing is sent. */
export const NO_NOTICES: PendingItemNotifier = Object.freeze({ noticesOf: () => [] });

/** Where a person opens the item in the approvers' console: `<public base>/console#/items/<kind>/<id>`. */
export const consoleUrlOf = (publicBase: string, kind: string, id: string): string =>
  `${publicBase.replace(/\/+$/, '')}/console#/items/${encodeURIComponent(kind)}/${encodeURIComponent(id)}`;

/** Announces each item to every configured endpoint (Standard Webhooks' `webhook-id` is `msg_<uuid>`). */
export class WebhookNotices implements PendingItemNotifier {
  constructor(private readonly o: { endpoints: readonly string[]; publicBase: string; ids: IdGenerator }) {}

  noticesOf(item: PendingItem): OutboundNotice[] {
    if (this.o.endpoints.length === 0) return [];
    const body: PendingCreatedEvent = {
      type: 'pending.created',
      item: { kind: item.kind, id: item.id, summary: item.summary, consoleUrl: consoleUrlOf(this.o.publicBase, item.kind, item.id) },
      createdAt: item.createdAt,
    };
    const messageId = `msg_${this.o.ids.uuid()}`;
    return this.o.endpoints.map((endpoint) => ({ deliveryId: this.o.ids.uuid(), messageId, endpoint, body, createdAt: item.createdAt }));
  }
}
