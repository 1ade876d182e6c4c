"""The gRPC contract (koord/v1) and its generated Python code; imports only protobuf and grpc."""
