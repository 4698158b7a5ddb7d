/** Outbound calls: the endpoint rules of spec 2.5 and the port every outbound call goes through. */
export * from './endpoint.js';
export * from './ports.js';
