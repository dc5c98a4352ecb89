/** What a calendar file excludes, as day numbers (see dates.ts): read by ics.ts and calendar.ts. */

/** An all-day event repeated every `interval` years from `fromYear` on (RRULE:FREQ=YEARLY). */
export interface YearlyEvent {
  month: number;
  day: number;
  /** Days, at least 1. */
  length: number;
  fromYear: number;
  interval: number;
  /** The last day an occurrence may start on (UNTIL), or null. */
  untilDay: number | null;
  /** How many occurrences (COUNT), or null. */
  count: number | null;
  /** Occurrences left out (EXDATE): their first days. */
  except: number[];
}

/** What a calendar excludes, as day numbers (see dates.ts). */
export interface CalendarDays {
  days: number[];
  /** Inclusive [first, last]. */
  ranges: Array<[number, number]>;
  yearly: YearlyEvent[];
}
