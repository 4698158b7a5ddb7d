import { pino } from 'pino';
import type { Logger } from '@ets/domain';
import type { LogLevel } from './config/settings.js';

/**
 * JSON lines on stdout. Redaction is a second line of defence: nothing should ever hand the logger
 * a secret, but if an authorization header or key field slips into a log object it is censored.
 */
export function createLogger(level: LogLevel, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { service: 'ets' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: [
          'authorization', '*.authorization', 'headers.authorization', 'req.headers.authorization',
          'apiKey', '*.apiKey', 'rawKey', '*.rawKey', 'privateKey', '*.privateKey', 'password', '*.password',
        ],
        censor: '[redacted]',
      },
    },
    destination as never,
  ) as unknown as Logger;
}
