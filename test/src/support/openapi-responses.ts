import type { Request, Response } from 'express';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { buildOpenApiDocument, HTTP_METHODS, toOpenApiPath, type HttpApp, type OpenApiDocument, type OpenApiProfile, type OpenApiResponse } from '@ets/adapters-http';

/**
 * Every response of an in-process test server is checked against the served OpenAPI document:
 * the status must be documented for the operation, the content type must be one it lists, the
 * required headers must be there, and the body must match the schema (OpenAPI 3.1 schemas are
 * JSON Schema 2020-12, checked with ajv). A response of a mounted route the document does not
 * describe is a problem too; a request that reaches no mounted route must get the app's own
 * not-found answer (404, the error envelope). Every in-process server a test starts is checked
 * (validated-server.ts), so every HTTP test, and every route added later, is checked without
 * extra work.
 *
 * A problem does not change the response: it is recorded, and the test that made the request fails
 * after it ends (jest.setup-openapi.ts), naming the operation, status and what is wrong.
 */
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => void;
const DOC_ID = 'urn:ets:openapi';
/**
 * OpenAPI's own schema keywords beside JSON Schema 2020-12 (annotations, nothing to check), and the
 * members of the document around the schemas, so that ajv in strict mode takes the whole document
 * as the resource that `#/components/schemas/…` refer into.
 */
const OPENAPI_KEYWORDS = ['example', 'discriminator', 'xml', 'externalDocs', 'openapi', 'info', 'servers', 'paths', 'components', 'security', 'tags', 'webhooks', 'jsonSchemaDialect'];

interface Operation {
  method: string;
  template: string;
  pattern: RegExp;
  literalSegments: number;
  responses: Record<string, OpenApiResponse>;
}

/** What answered a request: the mounted routes of the app, as `method` and OpenAPI path template. */
export type MountedRoute = { method: string; template: string };

/** A path template as Express matches a route: a trailing slash optional, letters in any case. */
const templatePattern = (template: string): RegExp =>
  new RegExp('^/' + template.split('/').filter(Boolean).map((s) => (/^\{.+\}$/.test(s) ? '[^/]+' : s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/') + '/?$', 'i');

const pointer = (...parts: string[]) => '#/' + parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

export class OpenApiResponseValidator {
  private readonly ajv: Ajv2020;
  private readonly operations: Operation[] = [];
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(private readonly doc: OpenApiDocument) {
    this.ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true, validateFormats: true });
    addFormats(this.ajv);
    this.ajv.addVocabulary(OPENAPI_KEYWORDS);
    this.ajv.addSchema({ $id: DOC_ID, ...(structuredClone(doc) as object) } as never);
    for (const [template, item] of Object.entries(doc.paths)) {
      const segments = template.split('/').filter(Boolean);
      const pattern = templatePattern(template);
      for (const method of HTTP_METHODS) {
        const op = item[method];
        if (op) this.operations.push({ method, template, pattern, literalSegments: segments.filter((s) => !s.startsWith('{')).length, responses: op.responses ?? {} });
      }
    }
    // A literal path wins over a template that also matches (`/execution-intents/verify` over `/{id}`).
    this.operations.sort((a, b) => b.literalSegments - a.literalSegments);
  }

  /**
   * The problems of one response; empty when it is as documented. `mounted` are the routes of the
   * app that answered: a request matching one of them but no operation of the document is a
   * problem (an undocumented route), and one matching none must have got the not-found answer.
   */
  check(r: { method: string; path: string; status: number; headers: Record<string, unknown>; body: Buffer }, mounted: readonly MountedRoute[] = []): string[] {
    const method = r.method.toLowerCase();
    const op = this.operations.find((o) => o.method === method && o.pattern.test(r.path));
    if (!op) return this.checkUndocumented(r, mounted);
    const where = `${r.method.toUpperCase()} ${op.template} → ${r.status}${r.path === op.template ? '' : ` (${r.path})`}`;
    const statusKey = op.responses[String(r.status)] ? String(r.status) : op.responses[`${String(r.status)[0]}XX`] ? `${String(r.status)[0]}XX` : op.responses.default ? 'default' : undefined;
    if (!statusKey) return [`${where}: status ${r.status} is not documented (documented: ${Object.keys(op.responses).join(', ')})`];
    const { response, at } = this.resolveResponse(op.responses[statusKey]!, pointer('paths', op.template, op.method, 'responses', statusKey));
    const problems: string[] = [];
    for (const [name, header] of Object.entries(response.headers ?? {})) {
      if ((header as { required?: boolean }).required && r.headers[name.toLowerCase()] === undefined) problems.push(`${where}: header ${name} is missing`);
    }
    if (!response.content || r.status === 204 || r.status === 304 || (r.status >= 300 && r.status < 400)) return problems;
    const contentType = String(r.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    const mediaType = Object.keys(response.content).find((m) => m.toLowerCase() === contentType);
    if (!mediaType) return [...problems, `${where}: content type '${contentType}' is not documented (documented: ${Object.keys(response.content).join(', ')})`];
    if (response.content[mediaType]!.schema === undefined) return problems;
    const text = r.body.toString('utf8');
    let body: unknown = text;
    if (/json$/.test(mediaType)) {
      try {
        body = JSON.parse(text);
      } catch {
        return [...problems, `${where}: the body is not JSON`];
      }
    }
    const validate = this.validator(`${at}/content/${mediaType.replace(/~/g, '~0').replace(/\//g, '~1')}/schema`);
    if (!validate(body)) {
      const errors = (validate.errors ?? []).slice(0, 8).map((e) => `${e.instancePath || '(body)'} ${e.message ?? ''}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`);
      problems.push(`${where}: the body does not match the documented schema:\n    ${errors.join('\n    ')}\n  body: ${text.slice(0, 600)}`);
    }
    return problems;
  }

  /**
   * A request the document has no operation for. If a mounted route took it, the route is missing
   * from the document. Otherwise it reached no route, and the app's fallback must have answered it
   * with the error envelope of every other error (the document's `Error` schema): 404, or 405 for
   * a mounted path asked with a method it does not take.
   */
  private checkUndocumented(r: { method: string; path: string; status: number; body: Buffer }, mounted: readonly MountedRoute[]): string[] {
    const where = `${r.method.toUpperCase()} ${r.path} → ${r.status}`;
    const route = mounted.find((m) => m.method === r.method.toLowerCase() && templatePattern(m.template).test(r.path));
    if (route) return [`${where}: the route ${r.method.toUpperCase()} ${route.template} is mounted but the OpenAPI document has no such operation`];
    const otherMethod = mounted.some((m) => templatePattern(m.template).test(r.path));
    if (r.status !== 404 && !(r.status === 405 && otherMethod)) {
      return [`${where}: no operation of the OpenAPI document matches, and no mounted route: only the not-found answer (404, or 405 on a mounted path) may come from here`];
    }
    let body: unknown;
    try {
      body = JSON.parse(r.body.toString('utf8'));
    } catch {
      return [`${where}: the not-found answer is not JSON`];
    }
    const validate = this.validator(pointer('components', 'schemas', 'Error'));
    return validate(body) ? [] : [`${where}: the not-found answer is not the error envelope: ${r.body.toString('utf8').slice(0, 200)}`];
  }

  /** Follows `$ref: '#/components/responses/X'`; `at` is the JSON pointer of the response object. */
  private resolveResponse(response: OpenApiResponse, at: string): { response: OpenApiResponse; at: string } {
    if (!response.$ref) return { response, at };
    const name = /^#\/components\/responses\/(.+)$/.exec(response.$ref)?.[1];
    const target = name ? (this.doc.components?.responses?.[name] as OpenApiResponse | undefined) : undefined;
    if (!target) throw new Error(`OpenAPI: unresolvable response ${response.$ref}`);
    return this.resolveResponse(target, pointer('components', 'responses', name!));
  }

  private validator(schemaPointer: string): ValidateFunction {
    let v = this.validators.get(schemaPointer);
    if (!v) {
      v = this.ajv.compile({ $ref: `${DOC_ID}${schemaPointer}` });
      this.validators.set(schemaPointer, v);
    }
    return v;
  }
}

const validators = new Map<OpenApiProfile, OpenApiResponseValidator>();
export const responseValidatorFor = (profile: OpenApiProfile): OpenApiResponseValidator => {
  let v = validators.get(profile);
  if (!v) validators.set(profile, (v = new OpenApiResponseValidator(buildOpenApiDocument(profile))));
  return v;
};

/** Where problems wait for the end of the test that caused them (read by jest.setup-openapi.ts). */
const SINK = Symbol.for('ets.openapi.responseProblems');
const sink = (): string[] => ((globalThis as Record<symbol, string[]>)[SINK] ??= []);
export const takeResponseProblems = (): string[] => sink().splice(0);

/**
 * Checks every response of `httpApp` from now on. Express's application function calls `app.handle`
 * for each request, so wrapping it sees every response, whatever route or middleware sends it.
 */
export function checkResponsesAgainstOpenApi(httpApp: Pick<HttpApp, 'app' | 'routes'>, validator: OpenApiResponseValidator): void {
  const { app } = httpApp;
  const mounted: MountedRoute[] = httpApp.routes.map((r) => ({ method: r.method, template: toOpenApiPath(r.path) }));
  const handle = (app as unknown as { handle: (req: Request, res: Response, next?: unknown) => void }).handle.bind(app);
  (app as unknown as { handle: typeof handle }).handle = (req, res, next) => {
    const chunks: Buffer[] = [];
    const keep = (chunk: unknown, encoding?: unknown) => {
      if (chunk === undefined || chunk === null || typeof chunk === 'function') return;
      chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8'));
    };
    const write = res.write.bind(res);
    const end = res.end.bind(res);
    res.write = ((chunk: unknown, encoding?: unknown, cb?: unknown) => {
      keep(chunk, encoding);
      return (write as (...a: unknown[]) => boolean)(chunk, encoding, cb);
    }) as typeof res.write;
    res.end = ((chunk?: unknown, encoding?: unknown, cb?: unknown) => {
      keep(chunk, encoding);
      if (req.method !== 'HEAD') {
        try {
          const problems = validator.check({
            method: req.method,
            // The path as sent, as Express matched it: a URL parser would resolve `.` and `..`
            // segments (`/execution-intents/./resolve`), which name a route's parameter here.
            path: (req.originalUrl ?? req.url).split('?')[0]!,
            status: res.statusCode,
            headers: res.getHeaders() as Record<string, unknown>,
            body: Buffer.concat(chunks),
          }, mounted);
          sink().push(...problems);
        } catch (e) {
          sink().push(`${req.method} ${req.url}: the response could not be checked: ${(e as Error).message}`);
        }
      }
      return (end as (...a: unknown[]) => Response)(chunk, encoding, cb);
    }) as typeof res.end;
    handle(req, res, next);
  };
}
