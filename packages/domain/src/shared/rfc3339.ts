/**
 * RFC 3339 date-times (section 5.6), read strictly: `Date.parse` accepts `2099-02-30` (as March 2),
 * `24:00:00` (as the next day) and many shapes RFC 3339 does not, so a date that does not exist
 * could pass as another one.
 *
 * Refused: a month or day that does not exist (leap years counted), hour 24, minute or second 60
 * (a leap second is never a sensible expiry, and none will be inserted again), an offset beyond
 * ±23:59, and anything but `YYYY-MM-DDThh:mm:ss[.fraction](Z|±hh:mm)` (`T` and `Z` in either case).
 * The fraction may have any number of digits, as RFC 3339 allows; what lies below a millisecond
 * is dropped.
 */
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

const isLeapYear = (y: number): boolean => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
const daysInMonth = (y: number, m: number): number => [31, isLeapYear(y) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1]!;

/** Milliseconds since the epoch of a valid RFC 3339 date-time (fractions below 1 ms dropped); undefined otherwise. */
export function parseRfc3339(text: string): number | undefined {
  const m = DATE_TIME.exec(text);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  let offsetMinutes = 0;
  if (!m[8]) {
    const [oh, om] = [Number(m[10]), Number(m[11])];
    if (oh > 23 || om > 59) return undefined;
    offsetMinutes = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const millis = m[7] ? Number(m[7].slice(0, 3).padEnd(3, '0')) : 0;
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0-99 as 1900-1999.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, millis);
  return date.getTime() - offsetMinutes * 60_000;
}
