package xdssansio.interop.grpcjava;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

/** `/interop.Echo/Echo` on raw bytes: a backend answers its own name. */
final class Echo {
  static final MethodDescriptor<byte[], byte[]> METHOD =
      MethodDescriptor.<byte[], byte[]>newBuilder()
          .setType(MethodDescriptor.MethodType.UNARY)
          .setFullMethodName("interop.Echo/Echo")
          .setRequestMarshaller(new Bytes())
          .setResponseMarshaller(new Bytes())
          .build();

  private Echo() {}

  static Server backend(String name) throws IOException {
    ServerServiceDefinition service =
        ServerServiceDefinition.builder("interop.Echo")
            .addMethod(
                METHOD,
                ServerCalls.asyncUnaryCall(
                    (request, response) -> {
                      response.onNext(name.getBytes(StandardCharsets.UTF_8));
                      response.onCompleted();
                    }))
            .build();
    return NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
        .addService(service)
        .build()
        .start();
  }

  /** One RPC: the backend's name, or `error:CODE`. */
  static String call(Channel channel) {
    try {
      byte[] answer =
          ClientCalls.blockingUnaryCall(
              channel,
              METHOD,
              CallOptions.DEFAULT.withDeadlineAfter(2, TimeUnit.SECONDS),
              "hi".getBytes(StandardCharsets.UTF_8));
      return new String(answer, StandardCharsets.UTF_8);
    } catch (StatusRuntimeException e) {
      return "error:" + e.getStatus().getCode().name();
    }
  }

  private static final class Bytes implements MethodDescriptor.Marshaller<byte[]> {
    @Override
    public InputStream stream(byte[] value) {
      return new ByteArrayInputStream(value);
    }

    @Override
    public byte[] parse(InputStream stream) {
      try {
        return stream.readAllBytes();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }
}
