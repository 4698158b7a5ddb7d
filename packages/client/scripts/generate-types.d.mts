/** Types of generate-types.mjs, for the drift test. */
export declare const GENERATED: Record<'transaction' | 'attestation', string>;
export declare function generatedTypes(document: unknown, profile: keyof typeof GENERATED): Promise<string>;
export declare function generatedFile(profile: keyof typeof GENERATED): string;
export declare function committedTypes(profile: keyof typeof GENERATED): string;
