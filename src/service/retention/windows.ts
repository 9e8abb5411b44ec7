/**
 * The installation's retention windows and their defaults: what the retention settings
 * (./settings.ts) show and a workspace's own windows fall back to, and what the pruner
 * (src/service/engine/maintenance/pruner.ts) keeps history to.
 */

/** The installation's windows (config: JOBGATE_RETENTION_*). 0 days keeps that history forever. */
export interface RetentionDefaults {
  /** SUCCEEDED and CANCELLED executions (with their attempts). Default 30. */
  executionsDays: number;
  /** FAILED executions. Default 90. */
  failedExecutionsDays: number;
  /** Audit log rows. Default 365. */
  auditDays: number;
  /** COMPLETED and FAILED runs, with their findings. Default 90. */
  runsDays: number;
  /**
   * The newest executions of each recurring job kept whatever their age. Default 100. A one-off
   * job (and a retired one) goes whole, with its executions, once they are all past their window.
   */
  keepPerJob: number;
  /** Alert notifications. Default 90. */
  alertNotificationsDays: number;
  /** Live events, kept for subscriptions to replay. Default 72. */
  eventsHours: number;
}

/**
 * The installation's defaults as the settings see them (the same windows, live events' included).
 * Here, not beside the settings, so the service's context can name it without importing the
 * settings (which are built on the context).
 */
export type RetentionSettingsDefaults = RetentionDefaults;

export const DEFAULT_RETENTION: Readonly<RetentionDefaults> = Object.freeze({
  executionsDays: 30,
  failedExecutionsDays: 90,
  auditDays: 365,
  runsDays: 90,
  keepPerJob: 100,
  alertNotificationsDays: 90,
  eventsHours: 72,
});
