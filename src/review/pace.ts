import type { Clock } from '../platform/clock.ts';
import type { Queryable } from '../platform/db.ts';
import { HOUR_MS } from '../platform/time.ts';
import type { ReviewEstimate } from '../deposits/service.ts';
import type { ReviewObject } from '../deposits/types.ts';
import * as repository from './repository.ts';

/** How far back the desk's pace is measured for `estimated_resolution_bucket`. */
export const DESK_PACE_WINDOW_MS = 4 * HOUR_MS;
/**
 * The pace assumed of a staffed desk (reviews ended per hour) when it ended fewer in the window: a
 * quiet desk has few reviews to end, which says nothing about how fast it would end the next one.
 */
export const ASSUMED_REVIEWS_PER_HOUR = 4;

/**
 * `estimated_resolution_bucket` from the desk's real state: the orders ahead in the queue (which the deposit
 * service counts, as it opens the review) and the pace at which the desk ended reviews in the last four
 * hours (never assumed slower than a staffed desk). Four eyes takes two reviewers' time; an escalated review
 * is `extended`. It reads only the desk's own decisions, so the deposit service is given it when it is built.
 */
export class ReviewPace {
  constructor(private readonly clock: Clock) {}

  readonly estimate: ReviewEstimate = async (db: Queryable, input): Promise<ReviewObject['estimated_resolution_bucket']> => {
    if (input.escalated) return 'extended';
    const now = this.clock.now();
    const ended = await repository.countReviewsEndedSince(db, input.white_label_id, input.livemode, new Date(now.getTime() - DESK_PACE_WINDOW_MS));
    const reviewsPerHour = Math.max(ended / (DESK_PACE_WINDOW_MS / HOUR_MS), ASSUMED_REVIEWS_PER_HOUR);
    const minutes = ((input.in_review_ahead + 1) * 60 * (input.four_eyes_required ? 2 : 1)) / reviewsPerHour;
    if (minutes <= 15) return 'under_15m';
    if (minutes <= 60) return 'under_1h';
    if (minutes <= 240) return 'under_4h';
    return 'extended';
  };
}
