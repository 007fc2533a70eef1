package MockProvider;

# A mock LLM provider for the integration tests: a forking HTTP/1.1 server
# on a loopback port that records every request it receives (method, path,
# headers, body) as one JSON line, and answers according to a behavior.
#
# The behavior of a request is taken from, first match wins:
#   1. the control file (set_behavior), for all requests;
#   2. the credential: text after "~" in the bearer token, x-api-key or
#      api-key value (e.g. key "sk-a1~status=503");
#   3. the path: a "/m/<behavior>/" segment of the request path;
#   4. "ok".
# A behavior is a comma-separated list of:
#   ok                 200 chat.completion JSON naming the mock and model,
#                      with a usage object (usage=P:C:CACHED:REASONING,
#                      default 11:7:3:2; usage=none: without;
#                      shape=anthropic: an Anthropic message whose usage is
#                      input_tokens P, output_tokens C, cache_read K)
#   status=N           JSON error with status N
#   body=TEXT          error body text (with status=N), URI-escaped
#   retry=S            add "Retry-After: S"
#   sse=N              200 text/event-stream with N data events + [DONE]
#   sseerr=TYPE        200 text/event-stream whose first event is an error
#                      of that type (after a ": ping" comment with ping=1;
#                      Anthropic style "event: error" with anthropic=1)
#   gap=MS             delay between SSE events (default 200)
#   delay=MS           wait before answering
#   reset              close the connection with RST, no response
#   hang               read the request and never answer

use strict;
use warnings;

use IO::Socket::INET;
use JSON::PP;
use POSIX qw(WNOHANG _exit);
use Socket qw(SOL_SOCKET SO_LINGER);
use Time::HiRes qw(sleep time);
use Fcntl qw(:flock);

sub new {
    my ($class, %o) = @_;
    return bless {%o}, $class;
}

sub port { $_[0]{port} }
sub name { $_[0]{name} }

sub start {
    my ($self) = @_;

    my $srv = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1', LocalPort => $self->{port},
        Listen => 128, ReuseAddr => 1, Proto => 'tcp')
        or die "mock $self->{name}: listen $self->{port}: $!";

    my $pid = fork;
    die "fork: $!" unless defined $pid;

    if ($pid) {
        close $srv;
        $self->{pid} = $pid;
        return $self;
    }

    $SIG{CHLD} = 'IGNORE';
    $SIG{TERM} = sub { _exit(0) };

    while (1) {
        my $c = $srv->accept or next;
        my $child = fork;
        if (defined $child && $child == 0) {
            close $srv;
            $SIG{TERM} = 'DEFAULT';
            eval { $self->serve($c) };
            _exit(0);
        }
        close $c;
    }
}

sub stop {
    my ($self) = @_;
    return unless $self->{pid};
    kill 'TERM', $self->{pid};
    waitpid($self->{pid}, 0);
    delete $self->{pid};
}

sub DESTROY {
    my ($self) = @_;
    local $?;
    $self->stop if $self->{pid} && $$ != $self->{pid};
}

sub set_behavior {
    my ($self, $b) = @_;
    if (!defined $b) {
        unlink $self->{control};
        return;
    }
    open my $fh, '>', "$self->{control}.tmp" or die $!;
    print $fh $b;
    close $fh;
    rename "$self->{control}.tmp", $self->{control};
}

# all recorded requests, oldest first
sub requests {
    my ($self) = @_;
    open my $fh, '<', $self->{log} or return [];
    my $j = JSON::PP->new->ascii;
    my @r = map { $j->decode($_) } grep { /\S/ } <$fh>;
    return \@r;
}

sub clear {
    my ($self) = @_;
    unlink $self->{log};
}

sub serve {
    my ($self, $c) = @_;

    # keep-alive: answer requests until the peer closes
    while (1) {
        my $req = read_request($c) or return;
        $self->record($req);

        my $b = $self->behavior($req);
        my $keep = $self->respond($c, $req, $b);
        return unless $keep;
    }
}

sub read_request {
    my ($c) = @_;
    my $buf = '';

    while ($buf !~ /\r\n\r\n/) {
        my $n = sysread($c, $buf, 65536, length $buf);
        return undef unless $n;
    }

    my ($head, $rest) = split /\r\n\r\n/, $buf, 2;
    my @lines = split /\r\n/, $head;
    my ($method, $path) = (shift @lines) =~ /^(\S+) (\S+)/;

    my (%h, @order);
    for (@lines) {
        my ($k, $v) = /^([^:]+):\s*(.*)$/ or next;
        push @order, $k;
        $h{lc $k} = exists $h{lc $k} ? "$h{lc $k}, $v" : $v;
    }

    my $len = $h{'content-length'} // 0;
    while (length $rest < $len) {
        my $n = sysread($c, $rest, $len - length $rest, length $rest);
        return undef unless $n;
    }

    return { method => $method, path => $path, headers => \%h,
             header_names => \@order, body => $rest, time => time };
}

sub record {
    my ($self, $req) = @_;
    open my $fh, '>>', $self->{log} or die $!;
    flock($fh, LOCK_EX);
    print $fh JSON::PP->new->canonical->ascii->encode($req), "\n";
    close $fh;
}

sub behavior {
    my ($self, $req) = @_;

    if (open my $fh, '<', $self->{control}) {
        local $/;
        my $b = <$fh>;
        return $b if defined $b && length $b;
    }

    my $h = $req->{headers};
    my $key = $h->{'x-api-key'} // $h->{'api-key'} // '';
    if (!$key && ($h->{authorization} // '') =~ /^Bearer (\S+)/) {
        $key = $1;
    }
    return $1 if $key =~ /~(.+)$/;

    return $1 if $req->{path} =~ m{/m/([^/]+)/};

    return 'ok';
}

sub unescape {
    my ($s) = @_;
    $s =~ s/%([0-9A-Fa-f]{2})/chr(hex $1)/ge;
    return $s;
}

sub respond {
    my ($self, $c, $req, $b) = @_;

    my %o;
    for (split /,/, $b) {
        my ($k, $v) = split /=/, $_, 2;
        $o{$k} = $v // 1;
    }

    sleep($o{delay} / 1000) if $o{delay};

    if ($o{reset}) {
        setsockopt($c, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0));
        close $c;
        return 0;
    }

    if ($o{hang}) {
        my $x;
        sysread($c, $x, 1);
        return 0;
    }

    my $model = eval { decode_json($req->{body})->{model} } // '';

    if ($o{sseerr}) {
        my $ev = JSON::PP->new->canonical->encode({ error => {
            type => $o{sseerr}, message => "mock $self->{name} $o{sseerr}" } });
        if ($o{anthropic}) {
            $ev = JSON::PP->new->canonical->encode({ type => 'error',
                error => { type => $o{sseerr}, message => 'Overloaded' } });
        }
        my $out = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            . "Connection: close\r\n\r\n";
        $out .= ": ping\n\n" if $o{ping};
        $out .= "event: error\n" if $o{anthropic};
        $out .= "data: $ev\n\n";
        syswrite($c, $out);
        close $c;
        return 0;
    }

    if ($o{sse}) {
        my $gap = ($o{gap} // 200) / 1000;
        syswrite($c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     . "Cache-Control: no-cache\r\nConnection: close\r\n\r\n");
        for my $i (1 .. $o{sse}) {
            my $ev = JSON::PP->new->canonical->encode({
                id => "chunk-$i", model => $model,
                choices => [{ delta => { content => "part $i " } }] });
            syswrite($c, "data: $ev\n\n") or return 0;
            sleep($gap);
        }
        syswrite($c, "data: [DONE]\n\n");
        close $c;
        return 0;
    }

    my ($status, $body, $ctype) = (200, undef, 'application/json');

    if ($o{status}) {
        $status = $o{status};
        $body = defined $o{body} ? unescape($o{body})
            : encode_json({ error => { message => "mock $self->{name} error $status",
                                       type => 'mock_error', code => "mock_$status" } });
    } elsif (($o{shape} // '') eq 'anthropic') {
        my ($p, $c, $k) = split /:/, ($o{usage} // '11:7:3:2');
        $body = JSON::PP->new->canonical->encode({
            id => 'msg_mock', type => 'message', role => 'assistant',
            model => $model, provider => $self->{name},
            content => [{ type => 'text', text => "hello from $self->{name}" }],
            stop_reason => 'end_turn', stop_sequence => undef,
            usage => { input_tokens => $p + 0, output_tokens => $c + 0,
                       cache_creation_input_tokens => 0,
                       cache_read_input_tokens => $k + 0 } });
    } else {
        my %ok = (
            id => 'chatcmpl-mock', object => 'chat.completion',
            model => $model, provider => $self->{name},
            choices => [{ index => 0, message => { role => 'assistant',
                          content => "hello from $self->{name}" } }]);
        # usage=P:C:CACHED:REASONING (default 11:7:3:2), usage=none: absent
        my $u = $o{usage} // '11:7:3:2';
        if ($u ne 'none') {
            my ($p, $c, $k, $r) = map { $_ + 0 } split /:/, $u;
            $ok{usage} = { prompt_tokens => $p, completion_tokens => $c,
                           total_tokens => $p + $c,
                           prompt_tokens_details => { cached_tokens => $k },
                           completion_tokens_details =>
                               { reasoning_tokens => $r } };
        }
        $body = JSON::PP->new->canonical->encode(\%ok);
    }

    my $resp = "HTTP/1.1 $status Mock\r\nContent-Type: $ctype\r\n"
        . "Content-Length: " . length($body) . "\r\n"
        . "X-Mock-Provider: $self->{name}\r\n";
    $resp .= "Retry-After: $o{retry}\r\n" if $o{retry};
    $resp .= "\r\n$body";

    syswrite($c, $resp);
    return 1;
}

1;
