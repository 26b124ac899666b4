// Types of the node package (index.js).

/** A failure on the native side. */
export declare class XdsSansioError extends Error {
  /** record, scenario, resources, message, usage, io or internal */
  readonly kind: string;
  /** The 1-based line of the input, when it has lines. */
  readonly line: number | null;
  readonly detail: string;
}

/** One broken rule. */
export interface Finding {
  rule: string;
  side: 'client' | 'server';
  line: number;
  detail: string;
  passage: string;
}

export interface Line {
  line: number;
  source: string;
  actual: string | null;
  ok: boolean;
  error: string | null;
  note: string | null;
}

export interface Report {
  title: string;
  passed: boolean;
  lines: Line[];
  trailing: string | null;
  diagram: string;
}

export interface CheckOptions {
  side?: 'client' | 'server' | null;
  variant?: 'sotw' | 'delta';
  /** FileDescriptorSet files, for resources written as canonical JSON. */
  descriptors?: string[];
}

export declare function check(records: string, options?: CheckOptions): Finding[];
export declare function replay(scenario: string, name?: string): Report;

export interface ControlPlaneOptions {
  /** `{"resources": [Any, ...]}`, canonical JSON of a DiscoveryResponse. */
  resources?: string | null;
  /** A file or a directory of such files (.json, .yaml, .pb). */
  resourcesPath?: string | null;
  descriptors?: string[];
  listen?: string;
  /** Fault rules, one per line (`drop type=cds nth=1`, `close after=3`, ...). */
  faults?: string | null;
  /** Where the faults' random draws start: the same seed, the same faults. */
  seed?: number;
  /** A scenario whose server lines are played in time from the start. */
  scenario?: string | null;
}

export declare class ControlPlane {
  constructor(options?: ControlPlaneOptions);
  readonly port: number;
  /** `127.0.0.1:PORT`, for a bootstrap's server_uri. */
  readonly address: string;
  set(typeUrl: string, body: Uint8Array): void;
  remove(typeUrl: string, name: string): void;
  replace(resources: string | { resources: unknown[] }): void;
  endStreams(): void;
  streamCount(): number;
  records(): string;
  findings(side?: 'client' | 'server' | null): Finding[];
  stop(): void;
}

export interface Message {
  bytes: Buffer;
  text: string;
}

export interface Event {
  kind: string;
  detail: string;
}

export interface Step {
  messages: Message[];
  events: Event[];
}

export interface StepperOptions {
  role?: 'client' | 'server';
  variant?: 'sotw' | 'delta';
  perType?: string | null;
  nodeId?: string | null;
}

export declare class Stepper {
  constructor(options?: StepperOptions);
  connected(): Step;
  disconnected(): Step;
  subscribe(typeUrl: string, names?: string[]): Step;
  set(typeUrl: string, body: Uint8Array): Step;
  remove(typeUrl: string, name: string): Step;
  /** The peer's message: its bytes, a google-protobuf message (`serializeBinary`) or a
   * protobufjs message (its `$type` encodes it). */
  handle(message: Uint8Array | { serializeBinary(): Uint8Array } | { $type: { encode(m: unknown): { finish(): Uint8Array } } }): Step;
  advance(millis: number): Step;
}
