/** Structured logging, as adapters need it. Implementations must never be handed secrets. */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  child(bindings: object): Logger;
}

export const silentLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  child: () => silentLogger,
};

export interface RecordedLine {
  level: 'debug' | 'info' | 'warn' | 'error';
  obj: object;
  msg?: string;
}

/** A logger that keeps every line in memory, with child bindings merged: for tests of what gets logged. */
export function recordingLogger(): { logger: Logger; lines: RecordedLine[] } {
  const lines: RecordedLine[] = [];
  const make = (bindings: object): Logger => {
    const at = (level: RecordedLine['level']) => (obj: object, msg?: string) => {
      lines.push({ level, obj: { ...bindings, ...obj }, msg });
    };
    return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), child: (b) => make({ ...bindings, ...b }) };
  };
  return { logger: make({}), lines };
}
