// Conversions between milliseconds, the unit of this client's API, and
// protobuf Durations.
import type { Duration } from "./gen/google/protobuf/duration.js";

/** A protobuf Duration of ms milliseconds; ms must be finite and not negative. */
export function toDuration(ms: number): Duration {
  if (!Number.isFinite(ms) || ms < 0) {
    throw new RangeError(`a duration must be a finite, non-negative number of milliseconds, not ${ms}`);
  }
  const whole = Math.floor(ms);
  const seconds = Math.floor(whole / 1000);
  const nanos = Math.round((ms - seconds * 1000) * 1e6);
  return { seconds: BigInt(seconds), nanos };
}

/** A Duration as milliseconds; undefined for an absent one. */
export function fromDuration(d: Duration | undefined): number | undefined {
  if (d === undefined) return undefined;
  return Number(d.seconds) * 1000 + d.nanos / 1e6;
}
