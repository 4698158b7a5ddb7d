import { describe, expect, it, jest } from '@jest/globals';
import { EventEmitter } from 'node:events';
import type { Request, Response } from 'express';
import { gatedBy, ReadGate } from './read-gate.js';

/** Enters `callerId` and records when it starts; `leave()` of the started one frees its place. */
function entrant(gate: ReadGate, callerId: string, started: string[]) {
  let leave: (() => void) | undefined;
  const name = `${callerId}#${started.filter((s) => s.startsWith(callerId)).length + Math.random().toString(36).slice(2, 6)}`;
  const cancel = gate.enter(callerId, (l) => {
    leave = l;
    started.push(name);
  });
  return { name, cancel, leave: () => leave!() };
}

describe('ReadGate', () => {
  it('admits at most `concurrent` at once and at most `perCaller` of one caller', () => {
    const gate = new ReadGate({ concurrent: 3, perCaller: 2 });
    const started: string[] = [];
    const a = Array.from({ length: 5 }, () => entrant(gate, 'a', started));
    expect(started).toEqual([a[0]!.name, a[1]!.name]);
    expect(gate.stats()).toEqual({ active: 2, waiting: 3, activeByCaller: { a: 2 } });
    const b = Array.from({ length: 3 }, () => entrant(gate, 'b', started));
    expect(started).toEqual([a[0]!.name, a[1]!.name, b[0]!.name]);
    expect(gate.stats()).toEqual({ active: 3, waiting: 5, activeByCaller: { a: 2, b: 1 } });
  });

  it('gives a freed place to the callers in turn, each caller\'s requests in arrival order, so one caller\'s many requests never starve another', () => {
    const gate = new ReadGate({ concurrent: 2, perCaller: 2 });
    const started: string[] = [];
    const a = Array.from({ length: 6 }, () => entrant(gate, 'a', started));
    const b = entrant(gate, 'b', started);
    const c = entrant(gate, 'c', started);
    expect(started).toEqual([a[0]!.name, a[1]!.name]);
    a[0]!.leave();
    expect(started.at(-1)).toBe(b.name); // b waited behind six of a's, and goes first
    a[1]!.leave();
    expect(started.at(-1)).toBe(c.name);
    b.leave();
    expect(started.at(-1)).toBe(a[2]!.name);
    c.leave();
    expect(started.at(-1)).toBe(a[3]!.name);
    expect(gate.stats()).toMatchObject({ active: 2, waiting: 2 });
  });

  it('drops a request that leaves while waiting; leaving twice or cancelling after the start changes nothing', () => {
    const gate = new ReadGate({ concurrent: 1, perCaller: 1 });
    const started: string[] = [];
    const first = entrant(gate, 'a', started);
    const gone = entrant(gate, 'b', started);
    const next = entrant(gate, 'c', started);
    gone.cancel();
    expect(gate.stats()).toMatchObject({ active: 1, waiting: 1 });
    first.cancel();
    first.leave();
    first.leave();
    expect(started).toEqual([first.name, next.name]);
    expect(gate.stats()).toEqual({ active: 1, waiting: 0, activeByCaller: { c: 1 } });
    next.leave();
    expect(gate.stats()).toEqual({ active: 0, waiting: 0, activeByCaller: {} });
  });
});

describe('gatedBy', () => {
  /** A response as the middleware sees it: the caller, and the `close` event. */
  const response = (callerId: string) => Object.assign(new EventEmitter(), { locals: { caller: { callerId } } }) as unknown as Response & EventEmitter;
  const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

  it('lets an admitted request go on at a later turn of the event loop, also when a closing response frees the place, so other connections are read in between', async () => {
    const gate = new ReadGate({ concurrent: 1, perCaller: 1 });
    const [first, second] = [response('a'), response('b')];
    const [next1, next2] = [jest.fn(), jest.fn()];
    gatedBy(gate)({} as Request, first, next1);
    gatedBy(gate)({} as Request, second, next2);
    expect(next1).not.toHaveBeenCalled();
    await nextTurn();
    expect([next1.mock.calls.length, next2.mock.calls.length]).toEqual([1, 0]);
    // A response ends in a process tick; on a synchronous store the next request would run in it.
    first.emit('close');
    expect(next2).not.toHaveBeenCalled();
    expect(gate.stats()).toMatchObject({ active: 1, activeByCaller: { b: 1 } });
    await nextTurn();
    expect(next2).toHaveBeenCalledTimes(1);
  });

  it('does not start a request whose connection closed after it was admitted, and frees its place', async () => {
    const gate = new ReadGate({ concurrent: 1, perCaller: 1 });
    const gone = response('a');
    const next = jest.fn();
    gatedBy(gate)({} as Request, gone, next);
    gone.emit('close');
    await nextTurn();
    expect(next).not.toHaveBeenCalled();
    expect(gate.stats()).toEqual({ active: 0, waiting: 0, activeByCaller: {} });
  });
});
