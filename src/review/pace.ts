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
/** The longest bucket short of `extended` (`under_4h`), in minutes. */
const LONGEST_BUCKET_MINUTES = 240;

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
    const hoursPerReview = (input.four_eyes_required ? 2 : 1) / reviewsPerHour;
    // Past the longest bucket's reach every count is `extended`: the count stops one order beyond it, so that
    // a backlog of 100,000 open reviews costs the new one a bounded index read rather than a count of them all.
    const reach = Math.ceil(LONGEST_BUCKET_MINUTES / 60 / hoursPerReview) + 1;
    const ahead = await input.count_in_review_up_to(reach);
    const minutes = (ahead + 1) * 60 * hoursPerReview;
    if (minutes <= 15) return 'under_15m';
    if (minutes <= 60) return 'under_1h';
    if (minutes <= LONGEST_BUCKET_MINUTES) return 'under_4h';
    return 'extended';
  };
}
